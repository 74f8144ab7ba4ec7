"""A counter source for tests, built from recorded readings: a real implementation of the
energy source interface over a list of (time, cumulative joules), read at a clock's time
(linear between readings), since this machine has no energy counter of its own."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


def interpolate(readings: list[tuple[float, float]], t: float) -> float:
    """Cumulative joules at time t, linear between the recorded readings."""
    if t <= readings[0][0]:
        return readings[0][1]
    for (t0, j0), (t1, j1) in zip(readings, readings[1:], strict=False):
        if t <= t1:
            return j0 + (j1 - j0) * (t - t0) / (t1 - t0)
    return readings[-1][1]


@dataclass
class ReplayCounter:
    """Cumulative joules of one device from recorded readings; watts only if given."""

    readings: list[tuple[float, float]]
    clock: Callable[[], float] = time.perf_counter
    interval_s: float = 0.1
    host_wide: bool = False
    name: str = "replay"
    devices: tuple[str, ...] = ("dev0",)
    watts: float | None = None
    reads: list[float] = field(default_factory=list)
    closed: bool = False

    def read_j(self) -> tuple[float, ...]:
        t = self.clock()
        self.reads.append(t)
        return (interpolate(self.readings, t),)

    def power_w(self) -> tuple[float, ...] | None:
        return None if self.watts is None else (self.watts,)

    def close(self) -> None:
        self.closed = True


class ManualClock:
    """A clock that moves only when told (deterministic windows)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
