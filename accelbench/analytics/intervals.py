"""What a prediction interval is made of; no torch: the out-of-sample residual of one run
(log(predicted / observed) throughput, with its source, stack and conditions), the interval as
multipliers of a predicted throughput, and a run judged against its own interval. How the
residuals make an interval is accelbench.analytics.source_model (the stack as a level of its
own, issue 41).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

COVERAGE = 0.8
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
    """The conditions of a run, by which coverage and error are reported."""

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
    out together), its stack and the conditions of its run."""

    log_ratio: float
    source: str
    where: Conditions
    name: str = ""
    stack: str = ""  # the software stack its error is shared within ('' = its source's own)


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


@dataclass(frozen=True)
class Covered:
    """A residual's run against its own out-of-sample interval (its source left out)."""

    residual: Residual
    interval: Interval

    @property
    def inside(self) -> bool:
        """Whether the observed value fell inside the interval."""
        return self.interval.holds(math.exp(-self.residual.log_ratio))
