"""The one interface every energy source implements, and what a process without one gets.

A source reads cumulative energy counters, one per metered device (a GPU, a CPU package, its
DRAM), in joules since the source was opened; a meter takes differences over a timed window.
A machine with no readable counter gets `Unavailable` with the reason: never an estimate from
a nominal TDP, which would measure nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Unavailable:
    """Why this process has no energy reading; recorded as 'unavailable: <reason>'."""

    reason: str


class EnergySource(Protocol):
    """Cumulative joules per metered device, and (where the hardware reports it) watts."""

    name: str  # "nvml", "amdsmi", "hlml", "rapl"
    interval_s: float  # how often the counter moves: the shortest window it can resolve
    devices: tuple[str, ...]  # one label a counter: "GPU-<uuid>", "package-0", "dram-0"
    host_wide: bool  # True: the counters measure the host (RAPL), shared by its ranks

    def read_j(self) -> tuple[float, ...]:
        """Joules per device since the source was opened (monotonic)."""
        ...

    def power_w(self) -> tuple[float, ...] | None:
        """Watts per device as the hardware reports them now; None where it reports none."""
        ...

    def close(self) -> None:
        """Release the library or files the source holds."""
        ...


class Unwrapped:
    """A counter that wraps to 0 at `range_` made monotonic (RAPL's energy_uj wraps at
    max_energy_range_uj): read more often than it can wrap twice, it loses nothing."""

    def __init__(self, range_: float) -> None:
        self.range = range_
        self._last: float | None = None
        self._total = 0.0

    def update(self, raw: float) -> float:
        """The counter's growth since the first reading, given its raw value now."""
        if self._last is not None:
            step = raw - self._last
            self._total += step if step >= 0 else step + self.range
        self._last = raw
        return self._total
