"""The SQLite results store: one row per record, committed and synced as soon as it is measured.

The file is checked when the store is opened (`store/dbfile.py`): a path that is not a usable
accelbench database is refused with a one-line ConfigError before anything is measured, and
another program's database is never changed. Every operation opens its own connection and
closes it: a record's commit is synced (synchronous=FULL), checkpointed into the `.db` file and
its connection closed before `add` returns, so the `.db` file alone holds every record written
(the `-wal` file holds nothing a copy of the `.db` would miss once `add` has returned, unless
another process is reading at that instant; `close()` checkpoints again with TRUNCATE).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, suppress
from pathlib import Path

from accelbench.config.errors import ConfigError
from accelbench.config.paths import default_db_path
from accelbench.store.dbfile import (
    BUSY_BUDGET_S,
    check_path,
    connect_read,
    connect_write,
    ensure_uid,
    open_database,
    retry_busy,
    write_transaction,
)
from accelbench.store.record import Record
from accelbench.store.validate import RecordProblem, record_from_text, warn_skipped

_INSERT = ("INSERT INTO results (run_id, kind, status, created_utc, schema_version,"
           " record_json, uid) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(uid) DO NOTHING")


def _row(record: Record) -> tuple:
    return (record.run_id, record.kind, record.status, record.created_utc,
            record.schema_version, record.to_json(), record.uid or None)


class ResultStore:
    """Append-only store. Opening it checks the file (ConfigError on field `db`); `write=False`
    opens read-only: nothing is created or changed, and a missing file reads as empty."""

    def __init__(self, path: Path | str | None = None, *, write: bool = True,
                 busy_budget_s: float = BUSY_BUDGET_S) -> None:
        self.path = check_path(default_db_path() if path is None else path, write)
        self.write = write
        self.busy_budget_s = busy_budget_s
        open_database(self.path, write, busy_budget_s)

    def add(self, record: Record) -> int:
        """Write one record durably and return its id (the stored one if its uid is already
        there). Busy and locked are retried for `busy_budget_s`; other failures raise
        sqlite3.Error or OSError."""
        return self.add_many([record])[0][0]

    def add_many(self, records: Iterable[Record]) -> list[tuple[int, bool]]:
        """Write records in one transaction: (id, newly added) for each; a record whose uid is
        stored already is not written again."""
        rows = list(records)
        return retry_busy(lambda: self._insert(rows), self.busy_budget_s)

    def _insert(self, records: list[Record]) -> list[tuple[int, bool]]:
        if not self.write:
            raise sqlite3.OperationalError("the store was opened read-only")
        with closing(connect_write(self.path)) as conn:
            with write_transaction(conn):
                ensure_uid(conn)
                done = [self._insert_one(conn, r) for r in records]
            with suppress(sqlite3.Error):  # the .db alone complete; close() tries again
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        return done

    @staticmethod
    def _insert_one(conn: sqlite3.Connection, record: Record) -> tuple[int, bool]:
        cur = conn.execute(_INSERT, _row(record))
        if cur.rowcount:
            return int(cur.lastrowid), True
        row = conn.execute("SELECT id FROM results WHERE uid = ?", (record.uid,)).fetchone()
        return int(row[0]), False

    def _read(self, sql: str, args: tuple | list = ()) -> list[tuple]:
        if not self.path.exists():
            return []

        def run() -> list[tuple]:
            with closing(connect_read(self.path)) as conn:
                return conn.execute(sql, args).fetchall()

        return retry_busy(run, self.busy_budget_s)

    def get(self, record_id: int) -> Record | None:
        """One record by id, or None."""
        rows = self._read("SELECT id, record_json FROM results WHERE id = ?", (record_id,))
        records = self._records(rows)
        return records[0] if records else None

    def query(self, kind: str | None = None, run_id: str | None = None,
              status: str | None = None, limit: int | None = None) -> list[Record]:
        """Records matching the filters, oldest first (with a limit: the newest `limit`)."""
        where, args = [], []
        for column, value in (("kind", kind), ("run_id", run_id), ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT id, record_json FROM results"
        if where:
            sql += " WHERE " + " AND ".join(where)
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ConfigError("limit", f"must be at least 1, got {limit!r}", ">= 1")
            sql = f"SELECT * FROM ({sql} ORDER BY id DESC LIMIT {limit})"
        return self._records(self._read(sql + " ORDER BY id", args))

    def stored_texts(self) -> list[tuple[int, str]]:
        """(id, stored JSON text) of every row a reader can read, oldest first (a bundle
        carries them byte for byte); a row it cannot is skipped with a warning, as in query."""
        kept = []
        for rid, text in self._read("SELECT id, record_json FROM results ORDER BY id"):
            try:
                record_from_text(text)
            except RecordProblem as err:
                warn_skipped(self.path, rid, str(err))
                continue
            kept.append((rid, text))
        return kept

    def _records(self, rows: list[tuple]) -> list[Record]:
        """The rows as records; a row an older build let in that this one cannot read (wrong
        types, too deep, not JSON: store/validate.py) is skipped with a warning naming it."""
        kept = []
        for rid, text in rows:
            try:
                kept.append(Record.from_dict(record_from_text(text), rid))
            except RecordProblem as err:
                warn_skipped(self.path, rid, str(err))
        return kept

    def __iter__(self) -> Iterator[Record]:
        return iter(self.query())

    def checkpoint(self) -> bool:
        """Copy the write-ahead log into the `.db` file and empty it (TRUNCATE); best effort:
        False when another connection kept it from finishing or the file is not writable."""
        if not (self.write and self.path.exists()):
            return False
        try:
            with closing(connect_write(self.path)) as conn:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return not busy
        except sqlite3.Error:
            return False

    def close(self) -> None:
        """Checkpoint so the `.db` file alone is complete. The store holds no connection between
        calls, so close() may be called more than once."""
        self.checkpoint()
