"""A sweep stopped by SIGINT (Ctrl-C) or SIGTERM: what was kept, in one line.

The launcher has stopped the ranks of the cell that was running (bench/train/launch.py raises
CellInterrupted with its 'interrupted' outcome); the cells measured before it are in the store
already. `stopped_sweep` records that outcome and says what the store now holds; the command
line prints the line and exits with 128 + the signal's number (130, 143).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from accelbench.bench.outcome import Outcome
from accelbench.bench.peak import PEAK_KIND
from accelbench.bench.recording.recorder import Recorder
from accelbench.bench.train.launch import CellInterrupted
from accelbench.parallel.procs import Interrupted, signal_name
from accelbench.store.record import Record


class SweepInterrupted(Exception):  # noqa: N818 - named for what happened, as Interrupted is
    """The sweep ended on a signal; `line` says what was kept, `exit_code` is 128 + signal."""

    def __init__(self, line: str, exit_code: int) -> None:
        super().__init__(line)
        self.line, self.exit_code = line, exit_code


class CellSeen:
    """The view's cell callback, remembering which cell is running (for the line)."""

    def __init__(self, forward: Callable[[int, int, str], None]) -> None:
        self.forward, self.current = forward, None

    def __call__(self, i: int, total: int, label: str) -> None:
        self.current = f"cell {i + 1}/{total} ({label})"
        self.forward(i, total, label)

    def recorded(self, record: Record) -> None:
        """A cell's record is stored: no cell runs until the next starts (a peak measured for
        the cell is not the cell)."""
        if record.kind != PEAK_KIND:
            self.current = None


def _kept(recorder: Recorder) -> int:
    """Cells of this run in the store, read back from it: a signal that lands between a
    record's write and the recorder's bookkeeping leaves the store one ahead of
    `recorder.records`. The bookkeeping's count where the store cannot be read."""
    try:
        stored = recorder.store.query(run_id=recorder.run_id)
    except (sqlite3.Error, OSError):
        stored = recorder.records
    return sum(1 for r in stored if r.kind != PEAK_KIND)


def stopped_sweep(stop: Interrupted, recorder: Recorder, seen: CellSeen,
                  tag: Callable[[Outcome], Outcome] | None = None) -> SweepInterrupted:
    """Record the interrupted cell's outcome (where the launcher made one) and describe the
    store: 'interrupted by SIGINT: 3 cell(s) recorded in DB; cell 4/6 (...) recorded as
    interrupted'."""
    kept = _kept(recorder)
    cell = seen.current or "the sweep"
    if isinstance(stop, CellInterrupted):
        record = recorder(tag(stop.outcome) if tag else stop.outcome)
        what = f"{cell} recorded as {record.status}"
    elif seen.current:
        what = f"{cell} was running in this process and is not recorded"
    else:
        what = "no cell was running" if kept else "no cell had started"
    line = (f"interrupted by {signal_name(stop.signum)}: {kept} cell(s) recorded in "
            f"{recorder.store.path}; {what}")
    return SweepInterrupted(line, stop.exit_code)
