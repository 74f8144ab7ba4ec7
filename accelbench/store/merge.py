"""Several results databases into one (`accelbench results merge A.db B.db --into C.db`).

Lossless: each row is copied as it is stored (its record JSON byte for byte, run id, kind,
status, time and schema version); only the store's id is new. Duplicates are told apart by the
record's uid, which the target's unique index holds once: a record whose uid is already in the
target (or was in an earlier input) is not copied again, so merging twice adds nothing. A record
written before uids existed gets `content_uid` (a hash of its content, the same one `results
import` gives it) in the target's uid column, and its JSON is left as it was. The inputs are
opened read-only and never changed; the target is checked like any `--db` and written in one
transaction, so a merge that fails leaves it as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from accelbench.config.errors import ConfigError
from accelbench.store.dbfile import (
    connect_read,
    connect_write,
    ensure_uid,
    retry_busy,
    write_transaction,
)
from accelbench.store.record import Record, content_uid
from accelbench.store.store import ResultStore
from accelbench.store.validate import RecordProblem, check_stored_row

_COLUMNS = "run_id, kind, status, created_utc, schema_version, record_json"
_INSERT = (f"INSERT INTO results ({_COLUMNS}, uid) VALUES (?, ?, ?, ?, ?, ?, ?)"
           " ON CONFLICT(uid) DO NOTHING")
INPUT_ALLOWED = "an accelbench results database other than --into"


@dataclass
class Merged:
    """What one input gave the target: rows read, rows added, rows whose uid was there already,
    and of those how many differ in content from the record kept (a uid reused by another
    record: the one already there is kept)."""

    path: Path
    read: int = 0
    added: int = 0
    present: int = 0
    different: int = 0


def _same_file(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return a.samefile(b)
    return a.resolve() == b.resolve()


def check_inputs(inputs: Sequence[Path], into: Path) -> list[ResultStore]:
    """Each input opened read-only (the store's checks: a one-line ConfigError on 'db'); a
    missing input, or one that is the target, refused before anything is written."""
    if not inputs:
        raise ConfigError("DB", "no database to merge", INPUT_ALLOWED)
    stores = []
    for path in inputs:
        store = ResultStore(path, write=False)
        if not store.path.is_file():
            raise ConfigError("db", f"'{path}' does not exist", INPUT_ALLOWED)
        if _same_file(store.path, Path(into).expanduser()):
            raise ConfigError("db", f"'{path}' is the target of the merge", INPUT_ALLOWED)
        stores.append(store)
    return stores


def _rows(path: Path) -> Iterator[tuple]:
    """(source id, run_id, kind, status, created_utc, schema_version, record_json, uid) of every
    row, oldest first, through a read-only connection (uid None where the store has none)."""
    with closing(connect_read(path)) as conn:
        tables = {name for name, in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "results" not in tables:
            return  # an empty SQLite file: no records
        columns = {row[1] for row in conn.execute("PRAGMA table_info(results)")}
        uid = "uid" if "uid" in columns else "NULL"
        yield from conn.execute(f"SELECT id, {_COLUMNS}, {uid} FROM results ORDER BY id")


def _record(path: Path, row_id: int, text: str) -> Record:
    try:
        return Record.from_json(text)
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError("db", f"'{path}' record {row_id} is not a record ({err}); nothing "
                          "was merged", INPUT_ALLOWED) from err


def row_uid(path: Path, row_id: int, text: str, stored: str | None) -> str:
    """The uid a stored row is known by: its uid column (`stored`), else its JSON's uid, else
    the content uid (a record from before uids existed)."""
    if stored:
        return stored
    record = _record(path, row_id, text)
    return record.uid or content_uid(record)


def _same_content(path: Path, row: tuple, kept: str) -> bool:
    """Whether a row and the target's record of the same uid are one record (the JSON equal,
    or equal once read at the current schema with the uid set aside)."""
    if row[6] == kept:
        return True
    ours, theirs = _record(path, row[0], row[6]), Record.from_json(kept)
    return content_uid(ours) == content_uid(theirs)


def _uidless(conn: sqlite3.Connection, target: Path) -> dict[str, str]:
    """uid -> record JSON of the target's rows that have no uid (an old store's own records,
    which its immutable rows keep without one): an input's copy of them is not added again."""
    rows = conn.execute("SELECT id, record_json FROM results WHERE uid IS NULL OR uid = ''")
    return {row_uid(target, rid, text, None): text for rid, text in rows}


def _kept(conn: sqlite3.Connection, uidless: dict[str, str], uid: str) -> str | None:
    """The target's record JSON under this uid, or None."""
    if uid in uidless:
        return uidless[uid]
    row = conn.execute("SELECT record_json FROM results WHERE uid = ?", (uid,)).fetchone()
    return row[0] if row else None


def _merge_into(conn: sqlite3.Connection, target: Path, paths: Sequence[Path]
                ) -> list[Merged]:
    uidless = _uidless(conn, target)
    done = []
    for path in paths:
        merged = Merged(path)
        for row in _rows(path):
            merged.read += 1
            uid = row_uid(path, row[0], row[6], row[7])
            kept = _kept(conn, uidless, uid)
            if kept is None:  # looked up first: a merge that adds nothing writes nothing
                conn.execute(_INSERT, (*row[1:7], uid))
                merged.added += 1
                continue
            merged.present += 1
            if not _same_content(path, row, kept):
                merged.different += 1
        done.append(merged)
    return done


def _merge_once(target: Path, paths: Sequence[Path]) -> list[Merged]:
    with closing(connect_write(target)) as conn:
        with write_transaction(conn):
            ensure_uid(conn)
            done = _merge_into(conn, target, paths)
    return done


def check_rows(paths: Sequence[Path]) -> None:
    """Every row of every input checked whole (store/validate.py: the record, and its columns
    against it) before the target is opened: a database another build or another program
    filled is refused with one line naming the row, and nothing is made or written."""
    for path in paths:
        for row in _rows(path):
            try:
                check_stored_row(row[1:])
            except RecordProblem as err:
                raise ConfigError("db", f"'{path}' record {row[0]} is not a record: {err}; "
                                  "nothing was merged", INPUT_ALLOWED) from err


def merge(inputs: Sequence[Path | str], into: Path | str) -> list[Merged]:
    """Copy every record of `inputs` into `into` that it does not hold yet (by uid), in one
    transaction; returns what each input gave. ConfigError (one line) on a bad input or
    target before anything is written; sqlite3.Error or OSError if the write fails (the target
    is then unchanged)."""
    sources = check_inputs([Path(p) for p in inputs], Path(into))
    check_rows([s.path for s in sources])
    target = ResultStore(into)
    paths = [s.path for s in sources]
    done = retry_busy(lambda: _merge_once(target.path, paths), target.busy_budget_s)
    target.close()
    return done
