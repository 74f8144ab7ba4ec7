"""How far to trust one planned layout: its 80% prediction interval and its extrapolation flags;
no torch.

The interval comes from the shipped runs' leave-one-source-out residuals with the source as a
level of its own (shipped_intervals.shipped_interval_model, analytics.source_model): an
unseen stack's, or a named fitted stack's (`plan --stack`). The flags come from the envelope of
the same runs (shipped_intervals.validated_envelope), the memory headroom and the evidence
behind the prediction: fewer than MIN_SOURCES shipped sources behind its device generation and
precision, or behind its named stack. Both are estimates about an estimate, and are labelled so.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from accelbench.analytics.cluster import ClusterSpec
from accelbench.analytics.efficiency import class_of_key, device_class
from accelbench.analytics.envelope import HEADROOM, Envelope, Flag, memory_flag
from accelbench.analytics.intervals import Interval, conditions, precision_family
from accelbench.analytics.params import active_params
from accelbench.analytics.planner import PlanResult
from accelbench.analytics.shipped_intervals import (
    shipped_interval_model,
    unseen_class_interval_model,
    validated_envelope,
)
from accelbench.analytics.source_model import MIN_SOURCES, IntervalModel
from accelbench.analytics.train_setup import TrainSetup
from accelbench.config.model import ModelConfig

EVIDENCE = "evidence"  # the flag of a prediction with fewer than MIN_SOURCES sources behind it
PROFILE_CLASS = "measured profile"  # the conditions of compute timed by a machine profile


@dataclass(frozen=True)
class Ranges:
    """[low, high] of a layout's tokens/s (global and per device), MFU, HFU, step seconds and,
    given a token count, days to train (None without one)."""

    tokens_per_s: list[float]
    tokens_per_s_per_device: list[float]
    mfu: list[float]
    hfu: list[float]
    step_s: list[float]
    days: list[float] | None = None

    def to_dict(self) -> dict[str, list[float]]:
        """Plain dict for JSON, in field order (days only where a token count was given)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class Confidence:
    """A layout's interval (multipliers of its predicted throughput) and its flags."""

    interval: Interval
    flags: tuple[Flag, ...]

    @property
    def within_envelope(self) -> bool:
        """Whether no flag was raised."""
        return not self.flags

    def ranges(self, result: PlanResult, n_devices: int, train_tokens: float | None = None
               ) -> Ranges:
        """[low, high] of tokens/s (global and per device), MFU, HFU, step seconds and, given
        a token count, days to train."""
        step, iv = result.step, self.interval
        days = list(iv.time(step.days_for_tokens(train_tokens))) if train_tokens else None
        return Ranges(list(iv.throughput(step.tokens_per_s)),
                      list(iv.throughput(step.tokens_per_s / n_devices)),
                      list(iv.throughput(step.mfu)), list(iv.throughput(step.hfu)),
                      list(iv.time(step.step_s)), days)

    def to_dict(self, result: PlanResult, n_devices: int, train_tokens: float | None = None
                ) -> dict[str, object]:
        """Plain dict for JSON: the interval's method and group, the ranges and the flags."""
        return {"interval": {**self.interval.to_dict(), "estimate": True,
                             "method": "empirical quantiles of leave-one-source-out "
                                       "log-residuals (docs/planner.md)",
                             **self.ranges(result, n_devices, train_tokens).to_dict()},
                "flags": [f.to_dict() for f in self.flags],
                "within_envelope": self.within_envelope}


LIMITED = "peak_scale"  # a device variant's field that states a power or clock limit


def limited(device_key: str) -> bool:
    """Whether a device is a power- or clock-limited variant (`KEY:peak_scale=...`): a
    different device from its datasheet row, as no shipped source states a limit."""
    return LIMITED in device_key


def intervals_for(device_class_: str, profiled: bool, envelope: Envelope,
                  intervals: IntervalModel, unseen: IntervalModel | None) -> IntervalModel:
    """Which residuals make a prediction's interval: those of a device class never validated
    (`unseen`, where given) for a class no validated run is on or compute timed by a profile,
    else `intervals` (the shipped runs' leave-one-source-out residuals)."""
    if unseen is not None and (profiled or not envelope.has_class(device_class_)):
        return unseen
    return intervals


def prediction_interval(device_key: str, dtype: str, limiter: str, n_devices: int,
                        profiled: bool = False, stack: str | None = None) -> Interval:
    """The 80% interval `plan` gives a prediction on `device_key` (of `stack` where named and
    fitted, else an unseen stack's), from the shipped runs' residuals (each computed once a
    process); the report's overlays take theirs here: one rule for both. The precision,
    limiter and device count only report the run: the interval does not depend on them."""
    del dtype, limiter, n_devices
    model = intervals_for(class_of_key(device_key), profiled or limited(device_key),
                          validated_envelope(), shipped_interval_model(),
                          unseen_class_interval_model())
    return model.interval(stack)


def evidence_flags(intervals: IntervalModel, generation: str, dtype: str, stack: str | None,
                   device_key: str = "") -> list[Flag]:
    """Where fewer than MIN_SOURCES shipped sources stand behind a prediction, with the count:
    its device generation in its precision family, its named stack, and a power- or
    clock-limited variant (no shipped source states a limit)."""
    family = precision_family(dtype)
    n = intervals.sources(lambda r: r.where.generation == generation
                          and r.where.precision == family)
    flags = []
    if n < MIN_SOURCES:
        flags.append(Flag(EVIDENCE, f"{generation} {family}: fewer than {MIN_SOURCES} shipped "
                                      "sources", f"{n} source{'' if n == 1 else 's'}"))
    if stack and stack in intervals.stacks():
        k = intervals.sources(lambda r: r.stack == stack)
        if k < MIN_SOURCES:
            flags.append(Flag(EVIDENCE, f"stack {stack}: fewer than {MIN_SOURCES} shipped "
                                          "sources", f"{k} source{'' if k == 1 else 's'}"))
    if limited(device_key):
        flags.append(Flag(EVIDENCE, "a power or clock limit (peak_scale): no shipped source "
                                    "states one, so none is fitted; the interval of a device "
                                    "class never validated", "0 sources"))
    return flags


def assess(result: PlanResult, model: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
           intervals: IntervalModel, envelope: Envelope, headroom: float = HEADROOM,
           unseen: IntervalModel | None = None, stack: str | None = None) -> Confidence:
    """The interval and flags of one layout of `model` on `cluster` (of `stack` where named
    and fitted): a device class without validated runs, or compute timed by a profile, takes
    the `unseen` intervals (each class predicted without its own runs) where given."""
    cls = device_class(cluster.device)
    timed_by = PROFILE_CLASS if cluster.profile is not None else cls
    where = conditions(timed_by, setup.dtype, result.limiter, cluster.n_devices)
    flags = []
    if cluster.profile is not None:
        flags.append(Flag("device", "compute timed by a measured profile: no validated run "
                                    "was; the interval of a device class never validated"))
    chosen = intervals_for(cls, cluster.profile is not None or limited(cluster.device.key),
                           envelope, intervals, unseen)
    mem = memory_flag(result.memory.total, result.memory.usable_bytes, headroom)
    flags += [mem] if mem else []
    flags += envelope.flags(cls, setup.dtype, float(active_params(model)), cluster.n_devices,
                            setup.seq_len, result.step.mfu if result.memory.fits else None,
                            moe=bool(model.n_experts))
    flags += evidence_flags(intervals, where.generation, setup.dtype, stack,
                            cluster.device.key)
    return Confidence(chosen.interval(stack), tuple(flags))
