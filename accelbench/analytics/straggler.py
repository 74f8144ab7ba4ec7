"""Which rank is slow: under data parallelism every rank's step ends with the same collective, so
per-rank step times hide a straggler; its own compute does not. Pure arithmetic, no torch.

Each rank reports its compute seconds per timed step (bench/train/straggler.py: the CPU time
its forward and backward used, which waiting in a collective or being descheduled does not
add to). A rank is named when its median compute exceeds the median of its peers' medians by
more than the noise allows: by more than STRAGGLER_FLOOR (10%) and by more than
STRAGGLER_NOISE_FACTOR (3) times the ranks' typical step-to-step spread (the median over
ranks of each rank's interquartile range over its median). Only the slowest rank is named.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

STRAGGLER_FLOOR = 0.10  # below this a rank is not called slow, whatever the noise
STRAGGLER_NOISE_FACTOR = 3.0  # a rank must stand out by this many times the spread


@dataclass(frozen=True)
class Straggler:
    """The named rank (None: none stands out), and the evidence: its median compute and its
    peers', how much more that is, and the noise it had to exceed."""

    rank: int | None
    compute_s: float | None
    peers_compute_s: float | None
    excess: float | None  # compute / peers' - 1
    noise: float | None  # the relative spread a rank's steps show
    threshold: float | None  # the excess it had to pass

    def evidence(self) -> str:
        """One line for the record, the table and the report ('' when no rank was compared)."""
        if self.excess is None:
            return ""
        verdict = f"rank {self.rank} is slow" if self.rank is not None else "no rank stands out"
        return (f"{verdict}: compute {self.compute_s:.3g} s a step against its peers' "
                f"{self.peers_compute_s:.3g} s ({self.excess:+.0%}; threshold "
                f"{self.threshold:.0%}: {STRAGGLER_NOISE_FACTOR:g}x the steps' spread "
                f"{self.noise:.1%}, at least {STRAGGLER_FLOOR:.0%})")


def _quartiles(values: list[float]) -> tuple[float, float]:
    """The first and third quartiles (linear interpolation), of one value both that value."""
    ordered = sorted(values)
    n = len(ordered)

    def at(q: float) -> float:
        pos = q * (n - 1)
        low = int(pos)
        high = min(low + 1, n - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    return at(0.25), at(0.75)


def relative_spread(values: list[float]) -> float:
    """Interquartile range over the median (0 for one value or a zero median)."""
    middle = median(values)
    if len(values) < 2 or middle <= 0:
        return 0.0
    low, high = _quartiles(values)
    return (high - low) / middle


def find_straggler(compute_s_by_rank: dict[int, list[float]]) -> Straggler:
    """The rank whose median compute stands out beyond the noise of its peers (module
    docstring); an empty Straggler with fewer than two ranks with timings."""
    timed = {r: steps for r, steps in compute_s_by_rank.items() if steps}
    if len(timed) < 2:
        return Straggler(None, None, None, None, None, None)
    medians = {r: median(steps) for r, steps in timed.items()}
    slowest = max(medians, key=medians.__getitem__)
    peers = median(m for r, m in medians.items() if r != slowest)
    noise = median(relative_spread(steps) for steps in timed.values())
    threshold = max(STRAGGLER_FLOOR, STRAGGLER_NOISE_FACTOR * noise)
    excess = medians[slowest] / peers - 1 if peers > 0 else 0.0
    named = slowest if excess > threshold else None
    return Straggler(named, medians[slowest], peers, excess, noise, threshold)
