"""Progress as plain lines, for a log or a pipe (where a progress bar shows nothing): one line per
finished cell, '[3/12] train seq 1024 mb 8 ... 12.3 s', and for a study the time left,
', ETA 1m40s'."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

Write = Callable[[str], None]
Clock = Callable[[], float]


def duration(seconds: float) -> str:
    """'0.4 s', '12.3 s', '1m40s', '2h05m'."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class CellLines:
    """A sweep's progress callback (done, total, label of the cell starting now) as a line per
    finished cell; `close` (the sweep ended) writes the line of the cell still open."""

    def __init__(self, title: str, write: Write, clock: Clock = time.monotonic) -> None:
        self.title, self.write, self.clock = title, write, clock
        self.label: str | None = None  # the cell running, started at self.start
        self.start = 0.0
        self.done, self.total = 0, 0

    def update(self, done: int, total: int, label: str) -> None:
        now = self.clock()
        if self.label is not None and done > self.done:
            self._line(done, total, now)
        self.done, self.total = done, total
        self.label, self.start = (label, now) if done < total else (None, now)

    def close(self) -> None:
        if self.label is not None:
            self._line(self.done + 1, max(self.total, self.done + 1), self.clock())

    def _line(self, done: int, total: int, now: float) -> None:
        self.write(f"[{done}/{total}] {self.title} {self.label} ... {duration(now - self.start)}")
        self.label = None


class StudyLines:
    """A study's progress (`cell`: the study's cell `index` starts; `done`: it finished, or was
    skipped as finished before) as a line per cell run, numbered in the order the cells run
    ('[3/31]': the third cell run of the 31 that will run, the cells skipped so far left out of
    the count), with the time left: the rough estimates of the cells not closed (each over all
    its trials), scaled by how long the cells run took against theirs (the plain average of a
    cell run when there are no estimates)."""

    def __init__(self, estimates: Sequence[float], write: Write,
                 clock: Clock = time.monotonic) -> None:
        self.estimates, self.write, self.clock = list(estimates), write, clock
        self.closed: set[int] = set()
        self.label, self.start, self.index = "", 0.0, -1
        self.spent = self.spent_est = 0.0  # seconds of the cells run, and their estimates
        self.runs = self.skipped = 0

    def cell(self, index: int, label: str) -> None:
        """Cell `index` starts, or runs its next trial (its clock keeps running)."""
        if index != self.index or index in self.closed:
            self.index, self.start = index, self.clock()
        self.label = label

    def done(self, index: int, skipped: bool) -> None:
        if index in self.closed:
            return
        self.closed.add(index)
        if skipped:
            self.skipped += 1
            return
        took = self.clock() - self.start
        self.spent += took
        self.spent_est += self.estimate(index)
        self.runs += 1
        total = max(len(self.estimates), len(self.closed)) - self.skipped
        self.write(f"[{self.runs}/{total}] {self.label} ... {duration(took)}, "
                   f"ETA {duration(self.eta())}")

    def estimate(self, index: int) -> float:
        return self.estimates[index] if index < len(self.estimates) else 0.0

    def eta(self) -> float:
        """Seconds left (see the class)."""
        open_cells = [i for i in range(len(self.estimates)) if i not in self.closed]
        left = sum(self.estimate(i) for i in open_cells)
        if self.spent_est > 0 and left > 0:
            return left * self.spent / self.spent_est
        return len(open_cells) * self.spent / max(self.runs, 1)
