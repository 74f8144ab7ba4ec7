"""A sweep stopped by SIGINT (Ctrl-C) or SIGTERM: what was kept, in one line.

An interleaved sweep (bench/trials.py) has recorded, before it raises TrialsInterrupted, every
cell it finished and every unfinished cell with a finished trial (status 'interrupted', its
trials in the record; each trial was kept in the store as it ended, so a resumed sweep measures
only the rest). A launch stopped outside one raises CellInterrupted with its 'interrupted'
outcome, recorded here. `stopped_sweep` says what the store holds for this run, in cells and
trials, and what was lost (the trial that was running); the command line prints the line and
exits with 128 + the signal's number (130, 143).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from accelbench.bench.outcome import Outcome
from accelbench.bench.recording.recorder import Recorder
from accelbench.bench.train.launch import CellInterrupted
from accelbench.bench.trials import TrialsInterrupted
from accelbench.config.record_kinds import carries
from accelbench.config.records.peak import PeakMetrics
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
        if not carries(record.kind, PeakMetrics):
            self.current = None


def _stored(recorder: Recorder) -> list[Record]:
    """Cells of this run in the store, read back from it: a signal that lands between a
    record's write and the recorder's bookkeeping leaves the store one ahead of
    `recorder.records`. The bookkeeping where the store cannot be read."""
    try:
        stored = recorder.store.query(run_id=recorder.run_id)
    except (sqlite3.Error, OSError):
        stored = recorder.records
    return [r for r in stored if not carries(r.kind, PeakMetrics)]


def kept_text(cells: list[Record]) -> str:
    """'3 finished cell(s)', and '2 interrupted cell(s) with 5 of their 12 trial(s)' where
    the store holds cells recorded as interrupted (the trials each kept, of those asked)."""
    stopped = [r for r in cells if r.status == "interrupted"]
    text = f"{len(cells) - len(stopped)} finished cell(s)"
    if stopped:
        kept = sum(int(r.metrics.get("trials") or 0) for r in stopped)
        asked = sum(int(r.setup.trials or 1) for r in stopped)
        text += f" and {len(stopped)} interrupted cell(s) with {kept} of their {asked} trial(s)"
    return text


def stopped_sweep(stop: Interrupted, recorder: Recorder, seen: CellSeen,
                  tag: Callable[[Outcome], Outcome] | None = None) -> SweepInterrupted:
    """Record the interrupted cell's outcome (where a launcher outside an interleaved sweep
    made one) and say what the store holds and what was lost: 'interrupted by SIGINT: 3
    finished cell(s) and 1 interrupted cell(s) with 2 of their 6 trial(s) recorded in DB;
    lost: the running trial (seq 16 mb 2 ..., trial 3/6)'."""
    if isinstance(stop, TrialsInterrupted):
        lost = f"the running trial ({stop.lost})" if stop.lost else \
            "nothing (no trial was running)"
    elif isinstance(stop, CellInterrupted):
        recorder(tag(stop.outcome) if tag else stop.outcome)
        lost = f"the running launch of {seen.current or 'the sweep'}"
    elif seen.current:
        lost = f"{seen.current}, which was running in this process"
    else:
        lost = "nothing (no cell was running)"
    line = (f"interrupted by {signal_name(stop.signum)}: {kept_text(_stored(recorder))} "
            f"recorded in {recorder.store.path}; lost: {lost}")
    return SweepInterrupted(line, stop.exit_code)
