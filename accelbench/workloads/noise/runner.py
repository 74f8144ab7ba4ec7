"""The noise floor: an A/A check (`accelbench noise`). One training configuration is measured as
two identical conditions, A and B, interleaved over trials as any two cells of a sweep are
(bench/trials.py), each trial a model built anew from the same seed; then B's throughput is
compared with A's (analytics/stats.py `compare`: the ratio of medians with its bootstrap 95%
interval). Both conditions are the same work, so any difference is this machine's run-to-run
spread: the interval's larger distance from 1 is the noise floor, the smallest difference a
comparison on this machine, today, can tell from noise (docs/metrics.md, "The noise floor").

Each condition is a record of its own kind ('noise-cell', TrainMetrics, its spec tagged
`noise_condition`), never a training cell of the report's tables; the check itself is a
'noise' record (NoiseMetrics) whose spec is the configuration. A noise check always measures
now: resume skips none of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from accelbench.analytics.stats import MIN_RATIO_SAMPLES, compare
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
from accelbench.bench.train.spec import TrainSpec
from accelbench.config.errors import ConfigError
from accelbench.config.record_kinds import metrics_dict, read_metrics, record_kind
from accelbench.config.records.fields import ShownFigure
from accelbench.config.records.noise import NoiseMetrics
from accelbench.config.trial_count import trial_samples
from accelbench.workloads.noise.options import NoiseOptions

NOISE_KIND = "noise"  # the check's record
CELL_KIND = "noise-cell"  # each condition's record (TrainMetrics)
CONDITION_KEY = "noise_condition"  # spec field of a noise-cell: "A" or "B"
CONDITIONS = ("A", "B")
TRAIN_KIND = "train"  # what a condition measures: a training cell, read as one


@dataclass(frozen=True)
class NoiseSpec:
    """A noise check: the one-cell training spec both conditions run, and trials a condition."""

    train: TrainSpec
    trials: int

    @property
    def device(self) -> str:
        """The device as asked (auto, cpu, cuda:N)."""
        return self.train.device

    @property
    def title(self) -> str:
        """The banner and table title."""
        return f"{self.train.model.name} noise floor (A/A)"


def check_noise_trials(trials: object) -> int:
    """Trials a condition: a whole number, at least MIN_RATIO_SAMPLES (fewer give the ratio no
    interval, so no floor); ConfigError naming `trials` otherwise."""
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < MIN_RATIO_SAMPLES:
        raise ConfigError("trials", f"an A/A check needs at least {MIN_RATIO_SAMPLES} trials a "
                          f"condition for an interval, got {trials!r}",
                          f"{MIN_RATIO_SAMPLES} or more")
    return trials


def build_noise_spec(options: NoiseOptions) -> NoiseSpec:
    """The check's spec, every option checked (ConfigError before anything runs): the trials
    first, then the configuration as `train` checks it (one cell, synthetic data)."""
    from accelbench.bench.train.train_options import TrainOptions, build_spec

    trials = check_noise_trials(options.trials)
    train = build_spec(TrainOptions(
        model=options.model, data="synthetic", seq=str(options.seq),
        micro_batch=str(options.micro_batch), gas="1", dtype=options.dtype, recompute="none",
        sparsity="0", steps=options.steps, warmup_steps=options.warmup_steps,
        device=options.device, seed=options.seed, trials=str(trials)))
    return NoiseSpec(train, trials)


def tagged(outcome: Outcome, condition: str) -> Outcome:
    """A condition's outcome as its own kind, its spec naming the condition."""
    return replace(outcome, kind=CELL_KIND,
                   spec={**outcome.spec, "workload": NOISE_KIND, CONDITION_KEY: condition})


def run_noise(spec: NoiseSpec, sink: Sink, step: Any = None, cell: Progress | None = None,
              skip: Skip | None = None) -> list[Outcome]:
    """Measure both conditions, interleaved, then the check; every outcome sent to the sink as
    it exists. `skip` is not asked: a noise check always measures now."""
    from accelbench.bench.gemm_peak import SweepPeaks
    from accelbench.bench.train.cell import cell_spec
    from accelbench.bench.train.cell_trials import LocalCell, combine_train_trials
    from accelbench.bench.train.spec import cell_layout
    from accelbench.bench.trials import CellTrials, interleave
    from accelbench.hardware.detect import resolve_device

    train = spec.train
    device = resolve_device(train.device)
    peaks = SweepPeaks(device, train.tf32, sink, known=train.peaks)
    (one,) = train.cells()
    config = {**cell_spec(train, one, cell_layout(train, 1, one.gas), str(device)),
              "workload": NOISE_KIND}
    ids: dict[str, Any] = {}
    cells = []
    for name in CONDITIONS:
        local = LocalCell(train, one, device, peaks, step, config)
        cells.append(CellTrials(f"condition {name}", _tagging(local.trial, name),
                                _tagging(combine_train_trials, name)))
    outcomes = interleave(cells, spec.trials, train.seed, _keeping_ids(sink, ids), cell)
    check = noise_outcome(config, outcomes, train.seed, ids)
    sink(check)
    return [*outcomes, check]


def _tagging(make: Callable[[Any], Outcome], condition: str) -> Callable[[Any], Outcome]:
    return lambda arg: tagged(make(arg), condition)


def _keeping_ids(sink: Sink, ids: dict[str, Any]) -> Sink:
    """The sink, noting each condition's record id (where the sink returns a record)."""
    def keep(outcome: Outcome) -> Any:
        record = sink(outcome)
        if record_kind(outcome.kind).condition:  # a condition's record (not a peak's)
            ids[outcome.setup.noise_condition] = getattr(record, "id", None)
        return record
    return keep


def _either(a: bool | None, b: bool | None) -> bool | None:
    """True if either was disturbed, None when neither was judged."""
    if a is None and b is None:
        return None
    return bool(a) or bool(b)


def noise_floor(low: float | None, high: float | None) -> float | None:
    """The larger distance of the ratio interval's ends from 1 (a fraction), or None."""
    return None if low is None or high is None else max(1.0 - low, high - 1.0)


def noise_outcome(config: dict[str, Any], cells: list[Outcome], seed: int,
                  ids: dict[str, Any] | None = None) -> Outcome:
    """The check's record from its two conditions: B's throughput over A's with its interval
    and verdict, the floor, each condition's medians; a failed condition fails the check."""
    failed = next((o for o in cells if o.status != "ok"), None)
    if failed is not None:
        which = failed.setup.noise_condition or "?"
        return Outcome(NOISE_KIND, failed.status, config,
                       reason=f"condition {which}: {failed.reason or failed.status}")
    a, b = (trial_samples(o.raw, ShownFigure.STEP_TIME) for o in cells)
    ma, mb = (read_metrics(TRAIN_KIND, o.metrics) for o in cells)
    if a is None or b is None:
        return Outcome(NOISE_KIND, "error", config, reason="a condition kept no per-trial times")
    verdict = compare(a, b, lower_is_better=True, seed=seed)  # A's times over B's: B's speed
    ratio = verdict.ratio
    metrics = NoiseMetrics(
        trials=len(a), throughput_ratio=ratio.value, throughput_ratio_low=ratio.low,
        throughput_ratio_high=ratio.high, noise_verdict=verdict.outcome,
        noise_floor=noise_floor(ratio.low, ratio.high), interval_confidence=ratio.confidence,
        interval_method=ratio.method, step_time_s_median_a=ma.step_time_s_median,
        step_time_s_median_b=mb.step_time_s_median, tokens_per_s_global_a=ma.tokens_per_s_global,
        tokens_per_s_global_b=mb.tokens_per_s_global,
        disturbed=_either(ma.disturbed, mb.disturbed), trial_seed=seed)
    raw = {"step_times_s_a": a, "step_times_s_b": b, "condition_record_ids": dict(ids or {})}
    return Outcome(NOISE_KIND, "ok", config, metrics_dict(metrics), raw)
