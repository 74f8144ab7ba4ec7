"""Independent trials of a sweep's cells, interleaved, and what a cell's record makes of them.

A trial is one timed window with its own warm-up (the block: `warmup` untimed and `repeats`
timed repetitions of a block built anew; a training cell: its warm-up and timed steps of a
model built anew from the same seed). The cells of one sweep are measured round-robin: round r
runs trial r of every cell still running, in a seeded random order drawn per round, so that
drift, heat and other work on the machine fall on every cell alike. A cell's record is made
once its last trial has run: each timed figure is the median over trials of each trial's
median, with a distribution-free 95% interval (analytics/stats.py `median_interval`; none, and
said so, below 6 trials). Each timed window is bracketed by a DisturbanceProbe (outside the
window: a snapshot costs about 12 ms) and the record says whether any trial was disturbed.
docs/metrics.md has the rules; bench/block.py and bench/train/sweep.py use them.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Any

import torch

from accelbench.analytics.stats import CONFIDENCE, median_interval
from accelbench.bench.guard import settled_heap
from accelbench.bench.outcome import Outcome, Progress, Sink
from accelbench.config.schema import TrialFields, partial_metrics_dict
from accelbench.config.trials import TRIAL_VALUES, auto_trials
from accelbench.hardware.disturbance import OTHER_CPU_THRESHOLD, DisturbanceProbe

ORDER_SEED = 0  # the block sweep's order seed (a training sweep uses its --seed)


def resolve_trials(trials: int | None, device: torch.device) -> int:
    """The trials to run: as asked, or AUTO_TRIALS for this kind of device."""
    return trials if trials is not None else auto_trials(device.type)


class WindowProbe:
    """A DisturbanceProbe that never fails a measurement: start() and stop() go around a timed
    window (after its last synchronise), `result` is the window's dict (or why none); `threshold`
    is the share of the CPU capacity other processes may use before the window is disturbed
    (--disturbance-threshold)."""

    def __init__(self, device: torch.device, threshold: float = OTHER_CPU_THRESHOLD) -> None:
        self.result: dict[str, Any] | None = None
        self._started = False
        try:
            self._probe = DisturbanceProbe(threshold, gpu_uuid=_nvidia_uuid(device))
        except Exception as err:  # noqa: BLE001 - a probe must never end a cell
            self._probe, self.result = None, {"unavailable": f"probe not made: {err}"}

    def start(self) -> None:
        """Snapshot the window's start."""
        if self._probe is None:
            return
        try:
            self._probe.start()
            self._started = True
        except Exception as err:  # noqa: BLE001
            self.result = {"unavailable": f"probe start failed: {err}"}

    def stop(self) -> dict[str, Any] | None:
        """Snapshot the window's end; the window's disturbance as a dict."""
        if self._probe is None or not self._started:
            return self.result
        try:
            self.result = self._probe.stop().to_dict()
        except Exception as err:  # noqa: BLE001
            self.result = {"unavailable": f"probe stop failed: {err}"}
        return self.result


def _nvidia_uuid(device: torch.device) -> str | None:
    """The UUID of an NVIDIA GPU (its clocks and other processes are probed too), else None."""
    if device.type != "cuda" or getattr(torch.version, "hip", None):
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    return str(torch.cuda.get_device_properties(index).uuid)


# --- interleaving -------------------------------------------------------------------------


@dataclass(frozen=True)
class CellTrials:
    """One cell of an interleaved sweep: `run(r)` measures its trial r (an ok outcome, or the
    failure that ends the cell); `finish(ok trials)` makes its record."""

    label: str
    run: Callable[[int], Outcome]
    finish: Callable[[list[Outcome]], Outcome]


def interleave(cells: Sequence[CellTrials], trials: int, seed: int, sink: Sink,
               progress: Progress | None = None, done_before: int = 0) -> list[Outcome]:
    """Run `trials` rounds, each cell's trial r in round r, in a random order per round
    (random.Random(seed)); a cell's record is sunk at the end of the round of its last trial
    (its last, or the one that failed), in the cells' order, so a sparse cell's record follows
    its dense one's. One trial is one round in the cells' order, each record sunk as it is
    made (as before trials). Returns the records in the cells' order.
    `progress` is told each trial as it starts: (trials started before it, `done_before` +
    trials x cells in all, the cell's label and trial), `done_before` counting the sweep's cells
    finished before (skipped by resume)."""
    with settled_heap():
        return _interleave(cells, trials, seed, sink, progress, done_before)


def _interleave(cells: Sequence[CellTrials], trials: int, seed: int, sink: Sink,
                progress: Progress | None, done_before: int) -> list[Outcome]:
    """interleave's rounds (its docstring), under one settled heap."""
    rng = random.Random(seed)
    done: dict[int, Outcome] = {}
    kept: dict[int, list[Outcome]] = {i: [] for i in range(len(cells))}
    rounds: list[list[int]] = []
    total, started = done_before + trials * len(cells), done_before
    for r in range(trials):
        order = [i for i in range(len(cells)) if i not in done]
        if not order:
            break
        if trials > 1:
            rng.shuffle(order)
        rounds.append(order)
        ended = []
        for i in order:
            if progress:
                progress(started, total, _trial_label(cells[i].label, r, trials))
            started += 1
            outcome = cells[i].run(r)
            if outcome.status == "ok":
                kept[i].append(outcome)
                if r < trials - 1:
                    continue
                outcome = cells[i].finish(kept[i])
            elif trials > 1:
                outcome = _failed_in(outcome, r)
            done[i] = _with_order(outcome, i, rounds, cells, seed, trials > 1)
            if trials == 1:
                sink(done[i])
            else:
                ended.append(i)
        for i in sorted(ended):
            sink(done[i])
    return [done[i] for i in range(len(cells))]


def _trial_label(label: str, trial: int, trials: int) -> str:
    """A cell's progress label, with the trial when there are several."""
    return label if trials == 1 else f"{label}, trial {trial + 1}/{trials}"


def _failed_in(outcome: Outcome, trial: int) -> Outcome:
    """A failure: the record it is today, with the trial it happened in kept raw."""
    return replace(outcome, raw={**outcome.raw, "failed_trial": trial})


def _with_order(outcome: Outcome, index: int, rounds: list[list[int]],
                cells: Sequence[CellTrials], seed: int, several: bool) -> Outcome:
    """The order every round ran in (raw: cell labels; not for one trial, whose raw data stays
    as before trials), the seed and this cell's position in each round (metrics, for an ok
    record; raw for a failure of several trials, whose metrics stay as today)."""
    positions = [rd.index(index) for rd in rounds if index in rd]
    if not several and outcome.status != "ok":
        return outcome
    order = [[cells[i].label for i in rd] for rd in rounds]
    raw = {**outcome.raw, "trial_order": order} if several else outcome.raw
    if outcome.status != "ok":
        return replace(outcome, raw={**raw, **partial_metrics_dict(
            TrialFields, trial_seed=seed, trial_positions=positions)})
    metrics = {**outcome.metrics, **partial_metrics_dict(
        TrialFields, trial_seed=seed, trial_positions=positions, trial_cells=len(rounds[0]))}
    return replace(outcome, metrics=metrics, raw=raw)


# --- one cell's record from its trials ----------------------------------------------------


def timed_map(figures: type[StrEnum], prefixes: Sequence[str] = ("",)
              ) -> dict[str, tuple[str, ...]]:
    """combine_timed's `timed` from an enum whose first member is a median time and the rest
    the rates computed from it (config/schema.py StepTimed, PhaseTimed), once per prefix."""
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
