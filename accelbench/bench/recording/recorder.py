"""Turns a cell's outcome into an immutable record and writes it to the store at once.

If the store will not take a record (disk full, database read-only or locked past the
retries), the record is kept in `<db>.unsaved.jsonl` (store/unsaved.py), or printed on stderr
as JSON when even that fails; the sweep goes on, a warning names the file at once, and
`close()` raises `RecordsNotStored` (one line: the file, and the `results import` command).
"""

from __future__ import annotations

import atexit
import shlex
import sqlite3
import sys
from collections.abc import Callable

from accelbench.bench.outcome import Outcome
from accelbench.config.errors import ConfigError
from accelbench.store.record import Record, new_run_id
from accelbench.store.store import ResultStore
from accelbench.store.unsaved import keep, print_last_resort, unsaved_path


class RecordsNotStored(ConfigError):
    """Some measured records are not in the database; the message says where they are."""

    def __init__(self, problem: str) -> None:
        super().__init__("db", problem)


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class Recorder:
    """A sweep's sink: every outcome becomes a stored record the moment it is measured. Close
    it at the end of the command (or use it as a context manager); at interpreter exit an
    unclosed recorder closes its store and names any unsaved file."""

    def __init__(self, store: ResultStore, environment: dict, run_id: str | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.environment = environment
        self.run_id = run_id or new_run_id()
        self.records: list[Record] = []
        self.unsaved: list[Record] = []  # measured, not in the database
        self.unsaved_file = unsaved_path(store.path)
        self.printed = 0  # of those, how many only went to stderr
        self.write_error = ""
        self.warn = warn or _stderr_line
        self._closed = False
        atexit.register(self._close_quietly)

    def __call__(self, outcome: Outcome) -> Record:
        record = Record(kind=outcome.kind, status=outcome.status, spec=outcome.spec,
                        environment=self.environment, metrics=outcome.metrics, raw=outcome.raw,
                        reason=outcome.reason, run_id=self.run_id)
        try:
            record_id = self.store.add(record)
        except (sqlite3.Error, OSError) as err:
            record_id = None
            self._keep(record, err)
        stored = Record.from_json(record.to_json(), record_id)
        self.records.append(stored)
        return stored

    def _keep(self, record: Record, err: Exception) -> None:
        """The record the store refused, into the unsaved file, else onto stderr."""
        self.write_error = self.write_error or str(err) or type(err).__name__
        try:
            keep(self.unsaved_file, record)
            where = f"kept in '{self.unsaved_file}'"
        except OSError as file_err:
            print_last_resort(record, f"{self.unsaved_file}: {file_err.strerror or file_err}")
            self.printed += 1
            where = "printed on stderr as JSON"
        self.unsaved.append(record)
        self.warn(f"warning: db: a {record.kind} record could not be written to "
                  f"'{self.store.path}' ({err}); {where}")

    def problem(self) -> str:
        """What close() reports: how many records are not in the database, and where they are."""
        n, db = len(self.unsaved), self.store.path
        text = (f"{_plural(n, 'measured record')} could not be written to '{db}' "
                f"({self.write_error})")
        command = (f"accelbench results import {shlex.quote(str(self.unsaved_file))} "
                   f"--db {shlex.quote(str(db))}")
        if self.printed < n:
            text += (f"; {n - self.printed} kept in '{self.unsaved_file}': bring them back "
                     f"with '{command}'")
        if self.printed:
            text += (f"; {self.printed} could not be kept in a file either and were printed on "
                     "stderr as JSON lines: save those lines to a file and import it the same way")
        return text

    def _shut(self) -> bool:
        """Checkpoint and close the store once; True when records could not be stored."""
        if self._closed:
            return False
        self._closed = True
        atexit.unregister(self._close_quietly)
        self.store.close()
        return bool(self.unsaved)

    def close(self) -> None:
        """Checkpoint the store; raise RecordsNotStored if any record is not in it."""
        if self._shut():
            raise RecordsNotStored(self.problem())

    def _close_quietly(self) -> None:
        """close() without raising (at exit, or while another error is on its way out): the
        unsaved records are named on stderr instead."""
        if self._shut():
            self.warn(f"error: db: {self.problem()}")

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._close_quietly()
