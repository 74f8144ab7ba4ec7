"""Which rank is slow: under data parallelism every rank's step ends with the same collective, so
per-rank step times hide a straggler; its own compute does not. Pure arithmetic, no torch.

Each rank reports its compute seconds per timed step (bench/train/straggler.py: the user CPU
time of its step loop, which waiting in a collective, being descheduled or the kernel's page
faults do not add to). Ranks are compared within a group of peers that do the same work (the
ranks of one pipeline position: bench/train/cell_metrics.py). For each rank, every step's compute is
set against the median of its peers' at the same step (pairing by step takes out what all ranks
share: the step's own work and the machine's load at that moment); the rank with the largest
median ratio is the candidate. It is named only when the distribution-free interval of that
median ratio (analytics/stats.py, STRAGGLER_CONFIDENCE, the steps taken as independent) lies
wholly above the threshold: the larger of STRAGGLER_FLOOR, the smallest slowdown worth naming,
and the spread of the peers' own medians (with two peers or more: how much ranks that are not
named differ from each other). So the noise of the steps decides how sure the excess is, and
the peers' spread how large it must be.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from accelbench.analytics.stats import median_interval, min_median_samples

STRAGGLER_FLOOR = 0.10  # a rank less than 10% slower than its peers is never named
STRAGGLER_CONFIDENCE = 0.90  # of the interval of a rank's median excess over its peers
MIN_STRAGGLER_STEPS = min_median_samples(STRAGGLER_CONFIDENCE)  # 5 timed steps


@dataclass(frozen=True)
class Straggler:
    """The named rank (None: none stands out), and the evidence: its median compute and its
    peers', its median excess a step with the interval, the threshold the interval's low end
    had to pass, and the paired steps it rests on."""

    rank: int | None
    compute_s: float | None = None
    peers_compute_s: float | None = None
    excess: float | None = None  # median over steps of compute / peers' - 1
    excess_low: float | None = None  # the interval of that median
    excess_high: float | None = None
    threshold: float | None = None  # max(STRAGGLER_FLOOR, the peers' own spread)
    steps: int = 0
    coverage: float | None = None  # the interval's exact coverage (at least the confidence)
    note: str = ""  # why nothing was compared

    def evidence(self) -> str:
        """One line for the record, the table and the report ('' when no rank was compared)."""
        if self.note:
            return self.note
        if self.excess is None:
            return ""
        verdict = f"rank {self.rank} is slow" if self.rank is not None else "no rank stands out"
        return (f"{verdict}: compute {self.compute_s:.3g} s a step against its peers' "
                f"{self.peers_compute_s:.3g} s ({self.excess:+.0%} over {self.steps} paired "
                f"steps, {self.coverage:.0%} interval {self.excess_low:+.0%} to "
                f"{self.excess_high:+.0%}; named when the interval is above "
                f"{self.threshold:+.0%}: the larger of {STRAGGLER_FLOOR:.0%} and the peers' "
                "own spread)")


def paired_ratios(rank: int, steps_by_rank: dict[int, list[float]]) -> list[float]:
    """Each step's compute of `rank` over the median of the other ranks' at that step (steps
    that every rank timed; a peer step of 0 s is left out)."""
    n = min(len(steps) for steps in steps_by_rank.values())
    out = []
    for step in range(n):
        peers = median(s[step] for r, s in steps_by_rank.items() if r != rank)
        if peers > 0:
            out.append(steps_by_rank[rank][step] / peers)
    return out


def peers_spread(medians: dict[int, float], candidate: int) -> float:
    """(max - min) / median of the other ranks' median compute (0 with fewer than two)."""
    others = [m for r, m in medians.items() if r != candidate]
    middle = median(others) if others else 0.0
    if len(others) < 2 or middle <= 0:
        return 0.0
    return (max(others) - min(others)) / middle


def find_straggler(compute_s_by_rank: dict[int, list[float]]) -> Straggler:
    """The rank whose compute stands out of its peers' beyond the steps' noise (module
    docstring); an empty Straggler with fewer than two ranks with timings, one that says so
    with fewer than MIN_STRAGGLER_STEPS timed steps."""
    timed = {r: steps for r, steps in compute_s_by_rank.items() if steps}
    if len(timed) < 2:
        return Straggler(None)
    n = min(len(steps) for steps in timed.values())
    if n < MIN_STRAGGLER_STEPS:
        return Straggler(None, note=f"not compared: {n} timed steps, "
                                    f"{MIN_STRAGGLER_STEPS} needed for an interval")
    ratios = {r: paired_ratios(r, timed) for r in timed}
    candidate = max(ratios, key=lambda r: median(ratios[r]))
    interval = median_interval(ratios[candidate], STRAGGLER_CONFIDENCE)
    if interval.low is None or interval.high is None:
        return Straggler(None, note=f"not compared: {len(ratios[candidate])} paired steps, "
                                    f"{MIN_STRAGGLER_STEPS} needed for an interval")
    medians = {r: median(steps) for r, steps in timed.items()}
    threshold = max(STRAGGLER_FLOOR, peers_spread(medians, candidate))
    named = candidate if interval.low - 1 > threshold else None
    return Straggler(named, medians[candidate],
                     median(m for r, m in medians.items() if r != candidate),
                     interval.value - 1, interval.low - 1, interval.high - 1, threshold,
                     len(ratios[candidate]), interval.coverage)
