"""The trials a cell has finished, kept in the store as each one ends (the `trials` table).

A cell of several trials is one record, made once its last trial has run (bench/trials.py).
So that an interruption (SIGINT, SIGTERM, even SIGKILL) loses no finished trial, each trial's
measurement is written durably to the `trials` table the moment it ends, under the cell's
fingerprint (store/fingerprint.py) and the run that measured it. A trial is never a result of
its own: `results list`, exports and reports read records only. The cell's record lists the
rows it was made of (`TRIAL_ROWS_KEY` in its raw data); a row not yet in a finished record of
its cell is open, and a resumed sweep measures only the trials its cell's open rows lack.
Rows, like records, are never updated or deleted.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from accelbench.store.dbfile import (
    connect_read,
    connect_write,
    ensure_trials,
    retry_busy,
    write_transaction,
)
from accelbench.store.jsontext import dumps, loads
from accelbench.store.store import ResultStore

TRIAL_ROWS_KEY = "trial_rows"  # a cell record's raw: the ids of the trial rows it was made of
TRIAL_RUNS_KEY = "trial_runs"  # ... and the run that measured each of its trials

_INSERT = ("INSERT INTO trials (run_id, fingerprint, trial, created_utc, trial_json) "
           "VALUES (?, ?, ?, ?, ?)")


@dataclass(frozen=True)
class TrialRow:
    """One kept trial: its row id, the run that measured it, its index in the cell (0-based)
    and what the sweep stored of it (the trial's outcome and where it ran in its round)."""

    id: int
    run_id: str
    trial: int
    data: dict[str, Any]


def add_trial(store: ResultStore, run_id: str, fingerprint: str, trial: int,
              data: dict[str, Any]) -> int:
    """Write one finished trial durably (synced before it returns); its row id. Busy and
    locked are retried; other failures raise sqlite3.Error or OSError."""
    if not store.write:
        raise sqlite3.OperationalError("the store was opened read-only")
    row = (run_id, fingerprint, trial, datetime.now(UTC).isoformat(), dumps(data))

    def insert() -> int:
        with closing(connect_write(store.path)) as conn:
            with write_transaction(conn):
                ensure_trials(conn)
                row_id = int(conn.execute(_INSERT, row).lastrowid)
            return row_id

    return retry_busy(insert, store.busy_budget_s)


def cell_trials(store: ResultStore, fingerprint: str, after_id: int = 0) -> list[TrialRow]:
    """The trial rows of one cell with an id above `after_id`, oldest first (none from a
    store made before trials were kept, or a missing file)."""
    if not store.path.exists():
        return []

    def read() -> list[tuple]:
        with closing(connect_read(store.path)) as conn:
            return conn.execute("SELECT id, run_id, trial, trial_json FROM trials WHERE "
                                "fingerprint = ? AND id > ? ORDER BY id",
                                (fingerprint, after_id)).fetchall()

    try:
        rows = retry_busy(read, store.busy_budget_s)
    except sqlite3.OperationalError as err:
        if "no such table" in str(err):
            return []
        raise
    return [TrialRow(rid, run, trial, loads(text)) for rid, run, trial, text in rows]


def open_trials(rows: list[TrialRow], trials: int) -> dict[int, TrialRow]:
    """The trial a cell keeps for each index below `trials`: the latest row of that index."""
    kept: dict[int, TrialRow] = {}
    for row in rows:
        if 0 <= row.trial < trials:
            kept[row.trial] = row
    return kept


def closed_up_to(raw: dict[str, Any]) -> int:
    """The largest trial row id a finished record was made of (0: none), so that a later
    sweep of its cell starts from rows after it."""
    ids = raw.get(TRIAL_ROWS_KEY) or []
    return max((i for i in ids if isinstance(i, int)), default=0)
