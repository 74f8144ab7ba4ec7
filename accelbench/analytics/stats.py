"""Medians of independent trials, their intervals, and whether two conditions differ; no torch.

The median's interval is distribution-free: of n sorted samples, [x_(j), x_(n+1-j)] holds the
true median with probability 1 - 2 P(B <= j - 1), B ~ Binomial(n, 1/2), for any continuous
distribution (exact, deterministic, no resampling). j is the largest index whose coverage is
still at least the confidence asked for, so the stated coverage is the exact one achieved (for
95%: n = 6 gives 96.9%). Below MIN_MEDIAN_SAMPLES for 95% no such j exists and the interval is
left empty, marked too_few.

A ratio of two medians (a speedup) has no such exact interval; it is the percentile interval of
a seeded bootstrap over the independent trials of each condition (deterministic for a seed).
Simulated A/A studies (docs/metrics.md) showed it too narrow below 5 trials a condition
(about 10% false differences at 3), hence MIN_RATIO_SAMPLES.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from accelbench.config.errors import ConfigError

if TYPE_CHECKING:  # numpy is imported where a statistic is computed: listing a table needs none
    import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
MIN_RATIO_SAMPLES = 5  # trials per condition below which a ratio gets no interval
FASTER, SLOWER, NO_DIFFERENCE, TOO_FEW = ("faster", "slower", "no significant difference",
                                          "too few samples")
# a candidate that cannot be faster (a masked-dense sparse cell does the dense work and more)
# measured faster: the interval clears 1, but what it measured is drift or noise, not a gain
NOT_A_GAIN = "not a speedup: it cannot be faster"


@dataclass(frozen=True)
class Estimate:
    """A point value (a median, or a ratio of two medians) with its interval and how it was
    made, so a record or a table can state both; low/high are None when too_few."""

    value: float
    low: float | None
    high: float | None
    n: tuple[int, ...]  # samples per condition: (n,) for a median, (n_a, n_b) for a ratio
    confidence: float
    method: str
    too_few: bool = False
    coverage: float | None = None  # the exact coverage achieved, where the method knows it

    def includes(self, x: float) -> bool | None:
        """Whether x lies in the interval (None without one)."""
        if self.low is None or self.high is None:
            return None
        return self.low <= x <= self.high

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON."""
        out = asdict(self)
        out["n"] = list(self.n)
        return out


def _check_confidence(confidence: float) -> None:
    if not isinstance(confidence, int | float) or not 0 < confidence < 1:
        raise ConfigError("confidence", f"must be between 0 and 1, got {confidence!r}",
                          "0 < confidence < 1")


def _samples(field: str, samples: Sequence[float], positive: bool = False) -> np.ndarray:
    """The samples as a float array: at least one, all finite (and > 0 where a ratio needs)."""
    import numpy as np
    values = np.asarray(samples, dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{field}: need a non-empty list of numbers")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{field}: samples must be finite numbers")
    if positive and np.any(values <= 0):
        raise ValueError(f"{field}: samples of a ratio must be > 0")
    return values


def _binom_cdf_half(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def order_statistic_rank(n: int, confidence: float = CONFIDENCE) -> tuple[int, float] | None:
    """The 1-based rank j of the median interval [x_(j), x_(n+1-j)] and its exact coverage:
    the narrowest symmetric pair still covering at least `confidence`; None when n is too
    small for any."""
    best = None
    for j in range(1, n // 2 + 1):
        coverage = 1 - 2 * _binom_cdf_half(j - 1, n)
        if coverage < confidence:
            break
        best = (j, coverage)
    return best


def min_median_samples(confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose median can have an interval at this confidence (6 for 95%)."""
    _check_confidence(confidence)
    n = 1
    while order_statistic_rank(n, confidence) is None:
        n += 1
    return n


MIN_MEDIAN_SAMPLES = min_median_samples(CONFIDENCE)


def median_interval(samples: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """The median of independent trials with its distribution-free order-statistic interval
    (module docstring): exact and deterministic, so it needs no seed."""
    import numpy as np
    _check_confidence(confidence)
    values = np.sort(_samples("samples", samples))
    n, median = values.size, float(np.median(values))
    rank = order_statistic_rank(n, confidence)
    if rank is None:
        need = min_median_samples(confidence)
        return Estimate(median, None, None, (n,), confidence,
                        f"too few samples for a {confidence:.0%} interval (need {need})",
                        too_few=True)
    j, coverage = rank
    return Estimate(median, float(values[j - 1]), float(values[n - j]), (n,), confidence,
                    f"distribution-free order statistics (ranks {j} and {n + 1 - j} of {n})",
                    coverage=coverage)


def _bootstrap_medians(values: np.ndarray, rng: np.random.Generator, resamples: int
                       ) -> np.ndarray:
    """The medians of `resamples` resamples (with replacement) of values."""
    import numpy as np
    picks = rng.integers(0, values.size, size=(resamples, values.size))
    return np.median(values[picks], axis=1)


def ratio_interval(a_samples: Sequence[float], b_samples: Sequence[float],
                   confidence: float = CONFIDENCE, seed: int = 0,
                   resamples: int = RESAMPLES) -> Estimate:
    """median(a) / median(b) (speedup = ratio_interval(base times, times)) with the percentile
    interval of a seeded bootstrap over each condition's independent trials."""
    import numpy as np
    _check_confidence(confidence)
    if not isinstance(resamples, int) or isinstance(resamples, bool) or resamples < 100:
        raise ConfigError("resamples", f"must be an integer >= 100, got {resamples!r}", ">= 100")
    a, b = _samples("a_samples", a_samples, True), _samples("b_samples", b_samples, True)
    value, n = float(np.median(a) / np.median(b)), (a.size, b.size)
    if min(n) < MIN_RATIO_SAMPLES:
        return Estimate(value, None, None, n, confidence,
                        f"too few samples for an interval (need {MIN_RATIO_SAMPLES} a condition)",
                        too_few=True)
    rng = np.random.default_rng(seed)
    ratios = _bootstrap_medians(a, rng, resamples) / _bootstrap_medians(b, rng, resamples)
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return Estimate(value, float(low), float(high), n, confidence,
                    f"bootstrap percentile of the ratio of medians, {resamples} resamples, "
                    f"seed {seed}")


@dataclass(frozen=True)
class Verdict:
    """A candidate against a baseline: the ratio (> 1: the candidate is better) and what it
    supports claiming, so no speedup is stated that its interval does not carry."""

    ratio: Estimate
    outcome: str  # FASTER, SLOWER, NO_DIFFERENCE or TOO_FEW

    @property
    def significant(self) -> bool:
        """Whether the interval excludes no change."""
        return self.outcome in (FASTER, SLOWER)

    def text(self) -> str:
        """'1.41x [1.20, 1.63]', 'no significant difference (0.88x [0.71, 1.10])' or
        'too few samples (n=3, 4): 1.10x'."""
        r = self.ratio
        if r.low is None or r.high is None:
            counts = ", ".join(str(k) for k in r.n)
            return f"{TOO_FEW} (n={counts}): {r.value:.2f}x"
        shown = f"{r.value:.2f}x [{r.low:.2f}, {r.high:.2f}]"
        if self.outcome == NOT_A_GAIN:
            return f"{NOT_A_GAIN}, drift or noise ({shown})"
        return shown if self.significant else f"{NO_DIFFERENCE} ({shown})"

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON."""
        return {"outcome": self.outcome, "text": self.text(), "ratio": self.ratio.to_dict()}


def scaled(ratio: Estimate, factor: float) -> Estimate:
    """A ratio of medians times a known constant (a speedup of throughputs from a ratio of
    times when the work a step differs by `factor`), its interval with it."""
    return replace(ratio, value=ratio.value * factor,
                   low=None if ratio.low is None else ratio.low * factor,
                   high=None if ratio.high is None else ratio.high * factor)


def verdict_of(ratio: Estimate) -> Verdict:
    """FASTER when the whole interval is above 1, SLOWER when below, else NO_DIFFERENCE."""
    if ratio.low is None or ratio.high is None:
        return Verdict(ratio, TOO_FEW)
    if ratio.low > 1.0:
        return Verdict(ratio, FASTER)
    if ratio.high < 1.0:
        return Verdict(ratio, SLOWER)
    return Verdict(ratio, NO_DIFFERENCE)


def without_gain(verdict: Verdict) -> Verdict:
    """The verdict on a candidate that cannot beat its baseline (masked dense against dense):
    'faster' becomes NOT_A_GAIN, so noise is never stated as a speedup; the rest stand."""
    return Verdict(verdict.ratio, NOT_A_GAIN) if verdict.outcome == FASTER else verdict


def compare(baseline: Sequence[float], candidate: Sequence[float], *,
            lower_is_better: bool = True, confidence: float = CONFIDENCE, seed: int = 0,
            resamples: int = RESAMPLES) -> Verdict:
    """Whether the candidate beats the baseline: times (lower_is_better) give the speedup
    median(baseline) / median(candidate), throughputs median(candidate) / median(baseline)."""
    a, b = (baseline, candidate) if lower_is_better else (candidate, baseline)
    return verdict_of(ratio_interval(a, b, confidence, seed, resamples))
