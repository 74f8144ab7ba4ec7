"""A cell's record from its trials: each figure's median over them with its interval, and more."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from accelbench.analytics.stats import CONFIDENCE, median_interval
from accelbench.bench.outcome import Outcome
from accelbench.config.record_kinds import partial_metrics_dict
from accelbench.config.records.fields import TrialFields
from accelbench.config.trial_count import TRIAL_VALUES


def timed_map(figures: type[StrEnum], prefixes: Sequence[str] = ("",)
              ) -> dict[str, tuple[str, ...]]:
    """combine_timed's `timed` from an enum whose first member is a median time and the rest
    the rates computed from it (config/records/ StepTimed, PhaseTimed), once per prefix."""
    time, *rates = figures
    return {f"{p}{time}": tuple(f"{p}{rate}" for rate in rates) for p in prefixes}


def _interval(values: list[float]) -> list[float] | None:
    """[low, high] of the median of these trials, None when too few (or a value is missing)."""
    if any(v is None for v in values):
        return None
    estimate = median_interval(values)
    return None if estimate.too_few else [estimate.low, estimate.high]


def combine_timed(trials: Sequence[Mapping[str, Any]], timed: Mapping[str, Sequence[str]]
                  ) -> tuple[dict[str, Any], dict[str, list]]:
    """The cell's timed figures from each trial's metrics, and the per-trial values.

    `timed` maps a time key (a median over the window) to the rates computed from it (their
    numerator is the same in every trial: tokens or FLOPs a step). The time is the median of
    the trials' times; a rate is its numerator over that median (so tokens/s stays tokens per
    step over the step time), and each figure's interval is the order-statistic interval of its
    per-trial values (a monotone function of the time: the same trials bound it)."""
    out: dict[str, Any] = {}
    values: dict[str, list] = {}
    intervals: dict[str, list[float] | None] = {}
    first = trials[0]
    for time_key, rates in timed.items():
        times = [m.get(time_key) for m in trials]
        values[time_key] = times
        if any(t is None for t in times):
            continue
        median = statistics.median(times)
        out[time_key] = median
        intervals[time_key] = _interval(times)
        for key in rates:
            if first.get(key) is None:  # not a figure of this cell (no peak, not fp8, ...)
                continue
            per_trial = [m.get(key) for m in trials]
            values[key] = per_trial
            out[key] = first[key] * first[time_key] / median
            intervals[key] = _interval(per_trial)
    out.update(partial_metrics_dict(TrialFields, intervals=intervals))
    return out, values


def spread(trials: Sequence[Mapping[str, Any]], prefix: str) -> dict[str, Any]:
    """`<prefix>_min` and `_max` over every trial's timed repetitions, `_iqr` the median of the
    trials' IQRs (the spread inside one window)."""
    out: dict[str, Any] = {}
    for name, pick in (("min", min), ("max", max), ("iqr", statistics.median)):
        got = [m.get(f"{prefix}_{name}") for m in trials]
        if all(v is not None for v in got):
            out[f"{prefix}_{name}"] = pick(got)
    return out


def interval_fields(n: int) -> dict[str, Any]:
    """How the intervals of n trials were made: confidence, method and exact coverage."""
    estimate = median_interval([float(i) for i in range(n)])
    return partial_metrics_dict(TrialFields, trials=n, interval_confidence=CONFIDENCE,
                                interval_method=estimate.method,
                                interval_coverage=estimate.coverage)


@dataclass(frozen=True)
class WindowReading:
    """What a cell's record takes from one trial window's disturbance dict
    (hardware/disturbance.py Disturbance.to_dict; a key it lacks reads None)."""

    disturbed: bool | None = None  # None: not judged
    reasons: list[str] | None = None
    other_cpu_fraction: float | None = None


def read_window(window: Mapping[str, Any] | None) -> WindowReading | None:
    """A window's dict as a WindowReading, None where the trial has none (or an empty one)."""
    if not window:
        return None
    return WindowReading(**{f.name: window[f.name] for f in fields(WindowReading)
                            if f.name in window})


def disturbance_summary(windows: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Whether any trial's window was disturbed (None when none could be judged), which
    trials, their reasons ('trial 2: ...') and the largest share of the CPU others used."""
    read = [read_window(w) for w in windows]
    judged = [w for w in read if w and w.disturbed is not None]
    disturbed = {i: w for i, w in enumerate(read) if w and w.disturbed}
    flagged = list(disturbed)
    reasons = [f"trial {i + 1}: {reason}" for i, w in disturbed.items()
               for reason in w.reasons or ()]
    fractions = [w.other_cpu_fraction for w in judged if w.other_cpu_fraction is not None]
    return partial_metrics_dict(
        TrialFields, disturbed=bool(flagged) if judged else None, disturbed_trials=flagged,
        disturbance_reasons=reasons,
        other_cpu_fraction_max=max(fractions) if fractions else None)


def combined_raw(trials: Sequence[Outcome], values: Mapping[str, list]) -> dict[str, Any]:
    """The first trial's raw data at the top (as a one-trial record holds it), every trial's
    under raw['trials']['trial<k>'], and each timed figure's per-trial values (one trial: its
    raw data alone, as before trials)."""
    if len(trials) == 1:
        return dict(trials[0].raw)
    return {**trials[0].raw, "trials": {f"trial{k}": o.raw for k, o in enumerate(trials)},
            TRIAL_VALUES: dict(values)}
