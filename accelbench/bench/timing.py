"""The one timer every benchmark uses.

Warm-up calls are excluded; each timed window is bounded by device-side edges (device events
where hardware.device has them: CUDA and ROCm; a synchronise plus perf_counter elsewhere);
N repetitions give median, min, max, IQR and count. A step may time several named phases
(forward, backward) inside one repetition.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import torch

# synchronize is also imported from here (benchmarks/, the runner): hardware.device's own
from accelbench.hardware.device import has_timing_events, synchronize, timing_event

if TYPE_CHECKING:
    from accelbench.bench.window_probe import WindowProbe
    from accelbench.hardware.energy import EnergyMeter

FEW_SAMPLES = 5


@dataclass(frozen=True)
class TimingStats:
    """Summary of repeated timings of one phase, in seconds."""

    times_s: tuple[float, ...]
    median_s: float
    min_s: float
    max_s: float
    q1_s: float
    q3_s: float
    count: int

    @property
    def iqr_s(self) -> float:
        """Interquartile range."""
        return self.q3_s - self.q1_s

    @property
    def few_samples(self) -> bool:
        """True when there are too few samples to trust the spread."""
        return self.count < FEW_SAMPLES

    def to_dict(self) -> dict:
        """Plain dict (times as a list) with the derived fields."""
        out = asdict(self)
        out["times_s"] = list(self.times_s)
        out.update(iqr_s=self.iqr_s, few_samples=self.few_samples)
        return out


def summarize(times_s: list[float]) -> TimingStats:
    """Median and spread of a list of timings."""
    if not times_s:
        raise ValueError("no timings to summarize")
    ordered = sorted(times_s)
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return TimingStats(tuple(times_s), statistics.median(ordered), ordered[0], ordered[-1],
                       q1, q3, len(ordered))


class PhaseTimer:
    """Records the edges of named phases; resolves them to seconds after one final sync."""

    def __init__(self, device: torch.device, enabled: bool = True) -> None:
        self.device = device
        self.enabled = enabled
        self._events = has_timing_events(device)
        self._edges: dict[str, list[tuple]] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the body as one window of phase `name`."""
        if not self.enabled:
            yield
            return
        if self._events:
            start, end = timing_event(self.device), timing_event(self.device)
            start.record()
            yield
            end.record()
        else:
            synchronize(self.device)
            start = time.perf_counter()
            yield
            synchronize(self.device)
            end = time.perf_counter()
        self._edges.setdefault(name, []).append((start, end))

    def times_s(self) -> dict[str, list[float]]:
        """Seconds per window, by phase."""
        synchronize(self.device)
        if self._events:
            return {k: [s.elapsed_time(e) / 1e3 for s, e in v] for k, v in self._edges.items()}
        return {k: [e - s for s, e in v] for k, v in self._edges.items()}


def run_timed(step: Callable[[PhaseTimer], None], device: torch.device, warmup: int,
              repeats: int, meter: EnergyMeter | None = None,
              probe: WindowProbe | None = None) -> dict[str, TimingStats]:
    """Call `step` warmup times untimed, then `repeats` times timed; stats per phase. A
    meter, when given, brackets the timed repetitions only; a disturbance probe brackets them
    from outside the meter (its snapshots are neither timed nor metered)."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    idle = PhaseTimer(device, enabled=False)
    for _ in range(warmup):
        step(idle)
    synchronize(device)
    timer = PhaseTimer(device)
    if probe is not None:
        probe.start()
    if meter is not None:
        meter.start()
    for _ in range(repeats):
        step(timer)
    if meter is not None or probe is not None:
        synchronize(device)
    if meter is not None:
        meter.stop()
    if probe is not None:
        probe.stop()
    return {name: summarize(times) for name, times in timer.times_s().items()}


def timer_overhead_s(device: torch.device, repeats: int = 200) -> TimingStats:
    """What an empty timed window measures: the floor under every reported time."""
    def empty(timer: PhaseTimer) -> None:
        with timer.phase("empty"):
            pass

    return run_timed(empty, device, warmup=10, repeats=repeats)["empty"]
