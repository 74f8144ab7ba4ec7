"""Prediction intervals of the planner from its out-of-sample residuals; no torch.

A residual is log(predicted / observed) of a run's throughput (tokens/s per device, which MFU
is proportional to), the prediction made without that run's source (leave one source out), or
log(observed / predicted) of a measured step time. An interval is the empirical spread of the
residuals of the runs most like the planned one: the first group, in LEVELS order, holding at
least MIN_GROUP residuals (device generation, precision, dominant limiter; then generation,
precision and scale; generation and precision; generation), else every residual (pooled).

Quantiles with small n are order statistics, as split conformal prediction takes them: of n
sorted residuals the lower bound is the floor((n + 1) a)-th and the upper the
ceil((n + 1) (1 - a))-th (a = (1 - coverage) / 2), clamped to the smallest and the largest;
for exchangeable residuals each side then misses at most a of new runs. With n = 8 and 80%
that is the whole range of the group.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

COVERAGE = 0.8
MIN_GROUP = 8
# Groups tried in order, most specific first; () is the pooled set.
LEVELS: tuple[tuple[str, ...], ...] = (("generation", "precision", "limiter"),
                                       ("generation", "precision", "scale"),
                                       ("generation", "precision"), ("generation",), ())
# Device classes (efficiency.device_class) by generation; a class not here is its own.
GENERATIONS = {"a100": "ampere", "h100": "hopper", "tpu-v4": "tpu-v4"}
LARGE_SCALE_FROM = 512  # devices: 'large' scale from here on


def generation(device_class: str) -> str:
    """The device generation of a device class (a100: ampere, h100 and h200: hopper)."""
    return GENERATIONS.get(device_class, device_class)


def precision_family(dtype: str) -> str:
    """'16-bit' for bf16 and fp16 (the same peak and kernels), else the precision itself."""
    return "16-bit" if dtype in ("bf16", "fp16") else dtype


def scale(n_devices: int) -> str:
    """'large' from LARGE_SCALE_FROM devices on, else 'small'."""
    return "large" if n_devices >= LARGE_SCALE_FROM else "small"


@dataclass(frozen=True)
class Conditions:
    """What a prediction's error is conditioned on."""

    generation: str
    precision: str
    limiter: str
    scale: str

    def key(self, level: tuple[str, ...]) -> tuple[str, ...]:
        """The values of the fields a level names."""
        return tuple(getattr(self, name) for name in level)


def conditions(device_class: str, dtype: str, limiter: str, n_devices: int) -> Conditions:
    """A prediction's conditions from its device class, precision, limiter and device count."""
    return Conditions(generation(device_class), precision_family(dtype), limiter,
                      scale(n_devices))


@dataclass(frozen=True)
class Residual:
    """One out-of-sample error: log(predicted / observed) throughput, with its source (left
    out together) and the conditions of its run."""

    log_ratio: float
    source: str
    where: Conditions
    name: str = ""


def order_bounds(values: Sequence[float], coverage: float = COVERAGE) -> tuple[float, float]:
    """The two-sided `coverage` bounds of `values` as order statistics (module docstring)."""
    if not values:
        raise ValueError("no residuals")
    ordered, n, a = sorted(values), len(values), (1 - coverage) / 2
    low = min(n, max(1, math.floor((n + 1) * a)))
    high = min(n, max(1, math.ceil((n + 1) * (1 - a))))
    return ordered[low - 1], ordered[high - 1]


@dataclass(frozen=True)
class Interval:
    """An interval as multipliers of the predicted throughput: observed / predicted lies in
    [low, high] for `coverage` of runs like it; `group` says which residuals made it."""

    low: float
    high: float
    group: str
    n: int
    coverage: float = COVERAGE

    def throughput(self, value: float) -> tuple[float, float]:
        """Bounds of a throughput (tokens/s, MFU): value x low, value x high."""
        return value * self.low, value * self.high

    def time(self, value: float) -> tuple[float, float]:
        """Bounds of a time (a step, days to train): value / high, value / low."""
        return value / self.high, value / self.low

    def holds(self, observed_over_predicted: float) -> bool:
        """Whether an observed / predicted ratio falls inside."""
        return self.low <= observed_over_predicted <= self.high

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON."""
        return {"coverage": self.coverage, "low_factor": self.low, "high_factor": self.high,
                "group": self.group, "n_residuals": self.n}


def _group_name(level: tuple[str, ...], where: Conditions) -> str:
    return ", ".join(f"{name} {value}" for name, value in zip(level, where.key(level),
                                                               strict=True)) or "pooled"


@dataclass
class IntervalModel:
    """Residuals and the rule that turns them into an interval for given conditions."""

    residuals: tuple[Residual, ...]
    coverage: float = COVERAGE
    min_group: int = MIN_GROUP
    _cache: dict[tuple[Conditions, str | None], Interval] = field(default_factory=dict,
                                                                    repr=False)

    def interval(self, where: Conditions, leave_out: str | None = None) -> Interval:
        """The interval of the first group (LEVELS) with at least min_group residuals, the
        residuals of source `leave_out` excluded; pooled when none has enough."""
        key = (where, leave_out)
        if key not in self._cache:
            self._cache[key] = self._interval(where, leave_out)
        return self._cache[key]

    def _interval(self, where: Conditions, leave_out: str | None) -> Interval:
        usable = [r for r in self.residuals if r.source != leave_out]
        for level in LEVELS:
            want = where.key(level)
            group = [r.log_ratio for r in usable if r.where.key(level) == want]
            if len(group) >= self.min_group or not level:
                low, high = order_bounds(group, self.coverage)
                return Interval(math.exp(-high), math.exp(-low), _group_name(level, where),
                                len(group), self.coverage)
        raise AssertionError("the pooled level always answers")


@dataclass(frozen=True)
class Covered:
    """A residual's run against its own out-of-sample interval (its source left out)."""

    residual: Residual
    interval: Interval

    @property
    def inside(self) -> bool:
        """Whether the observed value fell inside the interval."""
        return self.interval.holds(math.exp(-self.residual.log_ratio))


def loso_coverage(model: IntervalModel) -> list[Covered]:
    """Every residual's run against the interval built without its source."""
    return [Covered(r, model.interval(r.where, leave_out=r.source)) for r in model.residuals]


def coverage_summary(rows: Iterable[Covered], by: str | None = None
                     ) -> dict[str, dict[str, float]]:
    """Runs, runs inside and the fraction inside, per value of a Conditions field (`by`) and
    overall."""
    groups: dict[str, list[bool]] = {}
    for row in rows:
        keys = ([getattr(row.residual.where, by)] if by else []) + ["overall"]
        for key in keys:
            groups.setdefault(key, []).append(row.inside)
    return {key: {"n": len(hits), "inside": sum(hits), "coverage": sum(hits) / len(hits)}
            for key, hits in _overall_last(groups).items()}


def _overall_last(groups: dict[str, list]) -> dict[str, list]:
    """The groups in order of first appearance, "overall" last."""
    if "overall" not in groups:
        return groups
    return {**{k: v for k, v in groups.items() if k != "overall"}, "overall": groups["overall"]}


def abs_error_summary(residuals: Iterable[Residual], by: str | None = None
                      ) -> dict[str, dict[str, float]]:
    """Median and worst |predicted / observed - 1| per value of a Conditions field and
    overall."""
    groups: dict[str, list[float]] = {}
    for r in residuals:
        for key in ([getattr(r.where, by)] if by else []) + ["overall"]:
            groups.setdefault(key, []).append(abs(math.exp(r.log_ratio) - 1))
    out = {}
    for key, errors in _overall_last(groups).items():
        ordered = sorted(errors)
        mid = len(ordered) // 2
        median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        out[key] = {"n": len(errors), "median_abs_error": median, "worst_abs_error": max(errors)}
    return out
