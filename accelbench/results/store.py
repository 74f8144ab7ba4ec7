"""The SQLite results store: one row per record, committed as soon as it is measured."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from accelbench.results.record import Record

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    created_utc TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    record_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id);
CREATE TRIGGER IF NOT EXISTS results_immutable BEFORE UPDATE ON results
BEGIN SELECT RAISE(ABORT, 'result records are immutable'); END;
CREATE TRIGGER IF NOT EXISTS results_undeletable BEFORE DELETE ON results
BEGIN SELECT RAISE(ABORT, 'result records are immutable: not deleted'); END;
"""


def default_db_path() -> Path:
    """$ACCELBENCH_DB, else $XDG_DATA_HOME/accelbench/results.db (~/.local/share by default)."""
    if os.environ.get("ACCELBENCH_DB"):
        return Path(os.environ["ACCELBENCH_DB"])
    base = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share"))
    return base / "accelbench" / "results.db"


class ResultStore:
    """Append-only store; each add() is its own transaction so a killed sweep keeps its rows."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else default_db_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.executescript(_SCHEMA)

    def add(self, record: Record) -> int:
        """Write one record durably and return its id."""
        with self._conn:
            cur = self._conn.execute(
                "INSERT INTO results (run_id, kind, status, created_utc, schema_version,"
                " record_json) VALUES (?, ?, ?, ?, ?, ?)",
                (record.run_id, record.kind, record.status, record.created_utc,
                 record.schema_version, record.to_json()),
            )
        return int(cur.lastrowid)

    def get(self, record_id: int) -> Record | None:
        """One record by id, or None."""
        row = self._conn.execute("SELECT id, record_json FROM results WHERE id = ?",
                                 (record_id,)).fetchone()
        return Record.from_json(row[1], row[0]) if row else None

    def query(self, kind: str | None = None, run_id: str | None = None,
              status: str | None = None, limit: int | None = None) -> list[Record]:
        """Records matching the filters, oldest first."""
        where, args = [], []
        for column, value in (("kind", kind), ("run_id", run_id), ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT id, record_json FROM results"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        if limit:
            sql = f"SELECT * FROM ({sql.replace(' ORDER BY id', ' ORDER BY id DESC')}" \
                  f" LIMIT {int(limit)}) ORDER BY id"
        return [Record.from_json(text, rid) for rid, text in self._conn.execute(sql, args)]

    def __iter__(self) -> Iterator[Record]:
        return iter(self.query())

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()
