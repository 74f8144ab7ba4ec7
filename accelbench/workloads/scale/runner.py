"""The scaling study (the study's table II): the same work at several device counts.

Weak scaling keeps the micro-batch per device (global batch grows with the devices); strong
scaling keeps the global batch (the micro-batch per device shrinks). Every count runs under
torchrun with data parallelism over its devices, the one-device baseline included, so all
counts are measured by the same harness. Counts are ordered smallest first whatever order they
were given in; speedup = throughput / throughput of the smallest count that ran (ok), and
scaling efficiency = speedup / (devices / that count). When that is not one device (no 1-device
run, or it failed), every row and the summary say so.

With --trials N every count is a cell of one interleaved comparison (each trial its own launch,
every count in every round, in a seeded random order), each count's record carries its trials'
intervals, and each speedup and scaling efficiency its 95% interval and verdict from the
trials (speedup_evidence; docs/metrics.md, "Trials of launched cells and the scaling study").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from accelbench.analytics.stats import ratio_interval, scaled, verdict_of
from accelbench.analytics.throughput import scaling_efficiency
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip, finished
from accelbench.bench.train.cell import KIND
from accelbench.bench.train.cell_trials import combine_train_trials
from accelbench.bench.train.launch import (
    LaunchPeaks,
    launch_trial,
    launched_cell_spec,
    launched_trials,
)
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.sweep import check_sweep
from accelbench.bench.trials import CellTrials, interleave
from accelbench.config.errors import ConfigError, require_choice, require_positive
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.scale import ScaleMetrics, ScaleRow
from accelbench.config.records.train import StepTimed
from accelbench.config.trial_count import trial_samples

MODES = ("weak", "strong")


@dataclass(frozen=True)
class ScaleSpec:
    """One training cell (the base) measured at each device count."""

    base: TrainSpec
    devices: tuple[int, ...] = (1, 2)
    mode: str = "weak"
    zero: int = 0


def spec_at(scale: ScaleSpec, n: int) -> TrainSpec:
    """The base cell laid out over n devices, data parallel, per the scaling mode."""
    micro_batch = scale.base.micro_batches[0]
    if scale.mode == "strong":
        if micro_batch % n:
            raise ConfigError("devices", f"strong scaling splits micro-batch {micro_batch} over "
                              f"{n} devices, which does not divide it",
                              f"device counts that divide {micro_batch}")
        micro_batch //= n
    layout = f"dp={n},zero={scale.zero}"
    return replace(scale.base, micro_batches=(micro_batch,), nproc=n, layout=layout)


def validate_scale(scale: ScaleSpec) -> ScaleSpec:
    """One cell, known mode, positive counts that each give a valid spec."""
    require_choice("mode", scale.mode, MODES)
    base = scale.base
    if len(base.cells()) != 1:
        raise ConfigError("scale", "the scaling study takes one cell (one value per sweep list)",
                          "single values for --seq, --micro-batch, --gas, --dtype, --recompute")
    for n in scale.devices:
        require_positive("devices", n)
        try:
            check_sweep(spec_at(scale, n))
        except ConfigError as err:  # the count's ranks: the user typed them as --devices
            if err.field != "nproc":
                raise
            raise ConfigError("devices", err.problem, err.allowed) from None
    return scale


def run_scale(scale: ScaleSpec, sink: Sink, on_cell: Progress | None = None,
              skip: Skip | None = None) -> list[Outcome]:
    """Every device count as a cell of one comparison: `trials` rounds (auto: per device), each
    running every count still going in a random order seeded by --seed, every trial its own
    torchrun launch, so the baseline count is measured in every round (bench/trials.py); one
    trial runs the counts in order, as before trials. Each record goes to `sink` once made; a
    count `skip` reports finished is returned without a launch; the peak is decided before
    the first launch (never, when every count is finished)."""
    validate_scale(scale)
    scale = replace(scale, base=launched_trials(scale.base))
    peaks = LaunchPeaks(scale.base, sink)
    asked = [{**launched_cell_spec(spec_at(scale, n), spec_at(scale, n).cells()[0]),
              **_scaled(scale, n)} for n in scale.devices]
    done = [finished(skip, KIND, spec) for spec in asked]
    to_run = []
    for n, outcome, spec in zip(scale.devices, done, asked, strict=True):
        if outcome is not None:  # one peak for every count, a skipped count's if there is one
            peaks.adopt(outcome)
            continue
        to_run.append(CellTrials(f"{n} device(s), {scale.mode} scaling",
                                 partial(_count_trial, scale, peaks, n), combine_train_trials,
                                 KIND, spec))
    measured = iter(interleave(to_run, scale.base.trials, scale.base.seed, sink, on_cell,
                               len(done) - len(to_run)))
    return [o if o is not None else next(measured) for o in done]


def _scaled(scale: ScaleSpec, n: int) -> dict:
    """What a count's record spec says of the study it belongs to."""
    return {"scale_mode": scale.mode, "scale_devices": n}


def _count_trial(scale: ScaleSpec, peaks: LaunchPeaks, n: int, trial: int) -> Outcome:
    """Trial `trial` of device count n: the base cell laid out over n devices, launched."""
    spec = spec_at(replace(scale, base=peaks.decided()), n)
    outcome = launch_trial(spec, spec.cells()[0], trial, spec.trials)
    return replace(outcome, spec={**outcome.spec, **_scaled(scale, n)})


def run_scale_sweep(scale: ScaleSpec, sink: Sink, step: object = None,
                    on_cell: Progress | None = None, skip: Skip | None = None) -> list[Outcome]:
    """run_scale in the registry's runner form (a scaling study has no per-step lines here)."""
    return run_scale(scale, sink, on_cell, skip)


def baseline_note(outcomes: list[Outcome], base_n: int | None) -> str:
    """Which count the speedups are over, and why when it is not one device."""
    if base_n is None:
        return "no device count ran: no speedup"
    one = [o for o in outcomes if o.setup.scale_devices == 1]
    if base_n == 1:
        return "speedup over 1 device"
    if not one:
        return f"speedup over {base_n} devices (no 1-device run)"
    return f"speedup over {base_n} devices (the 1-device run ended {one[0].status})"


def scaling_rows(outcomes: list[Outcome]) -> list[dict]:
    """Table II's columns per device count, smallest count first: throughput, speedup and
    scaling efficiency over the smallest count that ran (baseline_devices in every row), each
    with its 95% interval and verdict where both counts ran trials (speedup_evidence)."""
    ordered = sorted(outcomes, key=lambda o: o.setup.scale_devices)
    ok = [o for o in ordered if o.status == "ok"]
    base = ok[0] if ok else None
    base_n = base.setup.scale_devices if base else None
    note = baseline_note(ordered, base_n)
    rows = []
    for o in ordered:
        n = o.setup.scale_devices
        row = ScaleRow(devices=n, status=o.status, reason=o.reason or note,
                       baseline_devices=base_n,
                       global_batch=o.setup.micro_batch * o.setup.gas * n)
        if base is not None and o.status == "ok":
            tps, base_tps = o.typed.tokens_per_s_global, base.typed.tokens_per_s_global
            row = replace(row, tokens_per_s_global=tps, tokens_per_s_per_device=tps / n,
                          speedup=tps / base_tps,
                          scaling_efficiency=scaling_efficiency(tps, base_tps, n, base_n),
                          mfu=o.typed.mfu, trials=o.typed.trials,
                          **({} if o is base else speedup_evidence(base, o)))
        rows.append(row.stored())
    return rows


def speedup_evidence(base: Outcome, cell: Outcome) -> dict:
    """The speedup's 95% interval and verdict from both counts' independent trials, and scaling
    efficiency's interval (the speedup's over n / baseline n); nothing where either ran one
    trial. The ratio is analytics/stats.py's over each trial's step time (raw TRIAL_VALUES: a
    seeded bootstrap; too few trials give the verdict and no interval) times the counts' fixed
    tokens a step, so its value is the row's speedup exactly."""
    figure = StepTimed.STEP_TIME_S_MEDIAN
    a, b = trial_samples(base.raw, figure), trial_samples(cell.raw, figure)
    if a is None or b is None:
        return {}
    tokens = cell.typed.tokens_per_step_global / base.typed.tokens_per_step_global
    verdict = verdict_of(scaled(ratio_interval(a, b), tokens))
    low, high = verdict.ratio.low, verdict.ratio.high
    n, base_n = cell.setup.scale_devices, base.setup.scale_devices
    efficiency = {} if low is None or high is None else dict(
        scaling_efficiency_low=scaling_efficiency(low, 1.0, n, base_n),
        scaling_efficiency_high=scaling_efficiency(high, 1.0, n, base_n))
    return dict(speedup_low=low, speedup_high=high, speedup_verdict=verdict.outcome,
                **efficiency)


def summary_outcome(scale: ScaleSpec, outcomes: list[Outcome]) -> Outcome:
    """The study's table as its own record (kind 'scale'), beside the per-count cells."""
    rows = scaling_rows(outcomes)
    status = "ok" if any(r["status"] == "ok" for r in rows) else "error"
    spec = {"workload": "scale", "model_name": scale.base.model.name, "mode": scale.mode,
            "devices": list(scale.devices), "zero": scale.zero, "base": scale.base.to_dict()}
    base_n = ScaleRow.read(rows[0]).baseline_devices if rows else None
    return Outcome("scale", status, spec,
                   metrics_dict(ScaleMetrics(rows=rows, baseline_devices=base_n)),
                   reason=baseline_note(outcomes, base_n))
