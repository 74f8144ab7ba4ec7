"""The planner against published and measured runs: predicted vs observed MFU, errors per
source and overall, the runs it does not model listed with their reasons; no torch.

The runs themselves (the packaged csv's 49 rows and a few others, with their shapes, layouts,
oracles and tags) are in accelbench.analytics.published_runs. Only the csv's scored rows
(PUBLISHED_RUNS) are fitted and make the intervals' residuals; the runs found elsewhere
(FOUND_RUNS) and the MoE runs are predicted with those curves and reported apart.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.efficiency import class_of_key, device_class
from accelbench.analytics.envelope import Envelope, ValidatedRun
from accelbench.analytics.intervals import Residual, conditions, precision_family
from accelbench.analytics.params import active_params
from accelbench.analytics.planner import PlanResult, evaluate
from accelbench.analytics.published_runs import (
    FOUND_RUNS,
    MOE_NOT_MODELLED,
    MOE_RUNS,
    NOT_MODELLED,
    OWN_STACK,
    PUBLISHED_RUNS,
    SHAPES,
    STACKS,
    PublishedRun,
    UnmodelledRun,
    shape,
)
from accelbench.analytics.source_model import IntervalModel
from accelbench.analytics.steptime import TrainSetup, compute_efficiency
from accelbench.config.errors import ConfigError, checked_fields
from accelbench.config.layout import Layout, layout_from_fields, parse_layout_fields
from accelbench.config.model import ModelConfig
from accelbench.config.presets import resolve_model
from accelbench.config.schema import TrainFigure
from accelbench.config.vocab import GB
from accelbench.hardware.specs import DeviceSpec, get_spec

__all__ = ["FOUND_RUNS", "NOT_MODELLED", "PUBLISHED_RUNS", "SHAPES", "PublishedRun",
           "UnmodelledRun", "shape"]

# --- Validation: predictions against the published runs and against measured runs ---



@dataclass(frozen=True)
class MeasuredRun:
    """A measured training run the planner is validated on: its model (a name, or the
    ModelConfig a record carries: the exact shape), batch, precision, device row, devices,
    layout (a --layout string, a record's dict, or None: pure data parallel) and its MFU."""

    model: str | ModelConfig
    seq_len: int
    micro_batch: int
    gas: int
    dtype: str
    device_key: str
    n_devices: int
    layout: str | dict | None
    mfu: float
    record_id: int | None = None


MEASURED_RUN_KEYS = tuple(f.name for f in fields(MeasuredRun) if f.default is MISSING)


def measured_run_of(run: MeasuredRun | Mapping[str, Any]) -> MeasuredRun:
    """A run as MeasuredRun; a plain mapping (a hand-written run) must give MEASURED_RUN_KEYS."""
    if isinstance(run, MeasuredRun):
        return run
    return checked_fields(MeasuredRun, run, MEASURED_RUN_KEYS, "measured run")


@dataclass(frozen=True)
class ValidationRow:
    """Predicted against observed MFU of one run; error is relative to the observed value."""

    name: str
    device: str
    observed_mfu: float
    predicted_mfu: float
    predicted_tokens_per_s_per_device: float
    memory_gb: float
    fits: bool
    limiter: str
    oracle_tag: str
    setup_tag: str
    source: str = ""
    oracle_kind: str = TrainFigure.MFU
    oracle_value: float = 0.0
    fused_attention: bool = True
    run_id: str = ""
    source_key: str = ""
    notes: str = ""
    fp8_peak_utilisation: float | None = None
    framework: str = ""  # the run's framework and the overlap it was predicted with
    overlap: str = ""
    published_memory_gib: float | None = None  # the source's peak per device, where given
    dtype: str = "bf16"
    n_devices: int = 0

    @property
    def error(self) -> float:
        """(predicted - observed) / observed."""
        return (self.predicted_mfu - self.observed_mfu) / self.observed_mfu

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON."""
        return {**self.__dict__, "error": self.error}


def _predict(cfg: ModelConfig, device: DeviceSpec, n_devices: int, devices_per_node: int,
             setup: TrainSetup, layout: Layout, efficiency: float | None) -> PlanResult:
    """The planner's prediction for a run as it was laid out (published runs are checked
    against the arithmetic rules when loaded; a device variant takes its row's links)."""
    nodes = max(1, n_devices // devices_per_node)
    cluster = make_cluster(device, nodes, min(devices_per_node, n_devices))
    return evaluate(cfg, cluster, setup, layout, efficiency)


def run_setup(run: PublishedRun) -> TrainSetup:
    """What a published run trained, with its framework's overlap and fused kernels."""
    return TrainSetup(run.global_batch, run.seq_len, run.dtype,
                      fused_attention=run.fused_attention, overlap=run.overlap,
                      kernels=run.kernels)


def validate_published(efficiency: float | None = None,
                       runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS,
                       tops: dict[str, float] | None = None) -> list[ValidationRow]:
    """Each published run's predicted MFU against its published one (accelbench's formula),
    with the built-in curves, one large-GEMM efficiency for all, or `tops` by device class
    (fit_gemm_top's)."""
    rows = []
    for run in runs:
        eff = efficiency if tops is None else tops[device_class(run.device)]
        result = _predict(run.model, run.device, run.n_devices, run.devices_per_node,
                          run_setup(run), run.layout, eff)
        rows.append(ValidationRow(
            run.name, run.device.key, run.published_mfu(), result.step.mfu,
            result.step.tokens_per_s / run.n_devices, result.memory.total / GB,
            result.memory.fits, result.limiter, run.oracle_tag, run.setup_tag, run.source,
            run.oracle_kind, run.oracle_value, run.fused_attention, run.run_id, run.source_key,
            run.notes, result.step.fp8_peak_utilisation, run.framework, run.overlap,
            run.published_memory_gib, run.dtype, run.n_devices))
    return rows


def resolve_shape(name: str) -> ModelConfig:
    """A model by preset name (accelbench.config.presets) or else by validation shape name."""
    try:
        return resolve_model(name)
    except ConfigError:
        if name in SHAPES:
            return SHAPES[name]
        raise


def _measured_layout(run: MeasuredRun) -> Layout:
    """A measured run's layout: a --layout string, a dict (a record's), or None (pure data
    parallel); fields left out take the runtime's defaults (sp off), as the run did."""
    given = run.layout or {}
    fields = parse_layout_fields(given) if isinstance(given, str) else dict(given)
    tp, pp = int(fields.get("tp", 1)), int(fields.get("pp", 1))
    fields.setdefault("dp", max(1, int(run.n_devices) // (tp * pp)))
    fields["mb"] = int(run.micro_batch)
    return layout_from_fields({k: v for k, v in fields.items()
                               if k in Layout.__dataclass_fields__})


def validate_measured_runs(runs: list[MeasuredRun | Mapping[str, Any]],
                           efficiency: float | None = None) -> list[ValidationRow]:
    """Measured runs (MeasuredRun, or mappings with MEASURED_RUN_KEYS) against the planner's
    prediction.

    One node is assumed when n_devices fits the device's default node size; accelbench's model
    runs SDPA, so attention is fused.
    """
    rows = []
    for run in map(measured_run_of, runs):
        model = run.model  # a name, or the ModelConfig a record carries (exact shape)
        cfg = model if isinstance(model, ModelConfig) else resolve_shape(str(model))
        layout = _measured_layout(run)
        device = get_spec(str(run.device_key))
        n = int(run.n_devices)
        gpn = min(n, make_cluster(device, 1).devices_per_node)
        setup = TrainSetup(layout.dp * layout.mb * int(run.gas), int(run.seq_len),
                           str(run.dtype), fused_attention=True)
        result = _predict(cfg, device, n, gpn, setup, layout, efficiency)
        rows.append(ValidationRow(
            f"{getattr(model, 'name', model)} {n}x{device.key} {layout.label()}", device.key,
            float(run.mfu),
            result.step.mfu, result.step.tokens_per_s / n, result.memory.total / GB,
            result.memory.fits, result.limiter, "measured", "V", "accelbench results store",
            TrainFigure.MFU, float(run.mfu), True, source_key="measured", dtype=str(run.dtype),
            n_devices=n))
    return rows


def _solve_efficiency(predict_mfu: Callable[[float], float], observed_mfu: float,
                      start: float) -> float:
    """The compute efficiency at which a prediction meets the observed MFU. MFU grows with
    efficiency, less than in proportion where communication is exposed: one proportional
    step, then secant steps on the MFU gap (a handful of predictions instead of the fixed
    point's dozen and more, as `plan` solves every shipped run for its intervals); at most 30,
    stopping once a step moves it by less than 1e-13 of itself."""
    e0, m0 = start, predict_mfu(start)
    e1 = min(1.0, e0 * observed_mfu / m0)
    for _ in range(30):
        if abs(e1 - e0) <= 1e-13 * e0:
            return e1
        m1 = predict_mfu(e1)
        slope = (m1 - m0) / (e1 - e0)
        step = e1 + (observed_mfu - m1) / slope if slope > 0 else e1 * observed_mfu / m1
        e0, m0, e1 = e1, m1, min(1.0, max(step, 1e-6))
    return e1


def needed_efficiency(run: PublishedRun) -> float:
    """The efficiency that would make the planner reproduce this published run exactly."""
    return _solve_efficiency(lambda e: validate_published(e, (run,))[0].predicted_mfu,
                             run.published_mfu(), compute_efficiency(run.device))


def fit_gemm_top(needed: list[tuple[str, float]], classes: set[str] | None = None
                 ) -> dict[str, float]:
    """The built-in curves' one fitted number per device class: the median, over the class's
    runs, of the large-GEMM efficiency each run needs ((class, needed) pairs); "pooled" is the
    median over all, which a class without runs (in `classes`) takes."""
    pooled = statistics.median(value for _, value in needed)
    by_class: dict[str, list[float]] = {}
    for cls, value in needed:
        by_class.setdefault(cls, []).append(value)
    tops = {cls: statistics.median(values) for cls, values in by_class.items()}
    return {**{cls: pooled for cls in classes or ()}, **tops, "pooled": pooled}


def needed_by_run(runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS) -> list[tuple[str, float]]:
    """(device class, needed large-GEMM efficiency) of each run."""
    return [(device_class(run.device), needed_efficiency(run)) for run in runs]


def validate_leave_one_source_out(runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS
                                  ) -> list[ValidationRow]:
    """Each source's runs predicted with curves fitted without that source (fit_gemm_top on
    every other source's runs; a class left with no run takes the pooled fit): the planner
    judged on runs it has not seen. Rows in the order of `runs`."""
    return _leave_out(runs, lambda run: run.source_key)


def validate_leave_one_class_out(runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS
                                 ) -> list[ValidationRow]:
    """Each device class's runs predicted as a class with no published run is: with the
    pooled fit of the other classes' runs. The errors of a device the planner has never seen
    validated (B200, MI300X, ...). Rows in the order of `runs`."""
    return _leave_out(runs, lambda run: device_class(run.device))


_NEEDED: dict[int, tuple[tuple[PublishedRun, ...], list[tuple[str, float]]]] = {}


def _needed_once(runs: tuple[PublishedRun, ...]) -> list[tuple[str, float]]:
    """needed_by_run(runs), computed once a process for the same runs."""
    kept = _NEEDED.get(id(runs))
    if kept is None or kept[0] is not runs:
        kept = _NEEDED[id(runs)] = (runs, needed_by_run(runs))
    return kept[1]


def _leave_out(runs: tuple[PublishedRun, ...], key: Callable[[PublishedRun], str],
               needed: list[tuple[str, float]] | None = None) -> list[ValidationRow]:
    """Each group's runs (by `key`) predicted with the tops fitted without that group
    (`needed`: the runs' needed efficiencies where already solved)."""
    needed = _needed_once(runs) if needed is None else needed
    classes = {cls for cls, _ in needed}
    rows: dict[int, ValidationRow] = {}
    for group in dict.fromkeys(key(run) for run in runs):
        inside = [i for i, run in enumerate(runs) if key(run) == group]
        tops = fit_gemm_top([n for i, n in enumerate(needed) if i not in inside], classes)
        for i, row in zip(inside, validate_published(None, tuple(runs[i] for i in inside),
                                                     tops), strict=True):
            rows[i] = row
    return [rows[i] for i in range(len(runs))]


def nested_leave_one_source_out(without: str,
                                runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS
                                ) -> list[ValidationRow]:
    """Every run but source `without`'s, each predicted with the tops fitted without both
    `without` and its own source: the residuals an interval for `without` may rest on when
    `without` is left out whole (nothing of it in the fit, not even through the tops)."""
    needed = _needed_once(runs)
    keep = [i for i, run in enumerate(runs) if run.source_key != without]
    return _leave_out(tuple(runs[i] for i in keep), lambda run: run.source_key,
                      [needed[i] for i in keep])


def calibrate_efficiency(runs: list[MeasuredRun | Mapping[str, Any]]) -> dict[str, float]:
    """One compute efficiency per device key from measured runs: the median over its runs of
    the efficiency that makes the prediction match."""
    needed: dict[str, list[float]] = {}
    for run in map(measured_run_of, runs):
        device = get_spec(str(run.device_key))
        eff = _solve_efficiency(lambda e, r=run: validate_measured_runs([r], e)[0].predicted_mfu,
                                float(run.mfu), compute_efficiency(device))
        needed.setdefault(device.key, []).append(eff)
    return {key: statistics.median(values) for key, values in needed.items()}


def error_summary(rows: list[ValidationRow]) -> dict[str, float]:
    """Median and worst absolute relative error of predicted MFU, and the run count."""
    errors = [abs(r.error) for r in rows]
    if not errors:
        return {"n": 0}
    return {"n": len(errors), "median_abs_error": statistics.median(errors),
            "worst_abs_error": max(errors)}


def errors_by_source(rows: list[ValidationRow]) -> dict[str, dict[str, float]]:
    """error_summary of the rows of each source (source_key), in order of first appearance,
    then of all of them under "overall"."""
    return _errors_by(rows, lambda r: r.source_key)


def errors_by_precision(rows: list[ValidationRow]) -> dict[str, dict[str, float]]:
    """error_summary of the rows of each precision family (16-bit, fp8), then overall: the
    issue's targets are per precision."""
    return _errors_by(rows, lambda r: precision_family(r.dtype))


def _errors_by(rows: list[ValidationRow], key: Callable[[ValidationRow], str]
               ) -> dict[str, dict[str, float]]:
    """error_summary of the rows of each `key`, in order of first appearance, then overall."""
    keys = list(dict.fromkeys(map(key, rows)))
    out = {k: error_summary([r for r in rows if key(r) == k]) for k in keys}
    out["overall"] = error_summary(rows)
    return out


@dataclass(frozen=True)
class Validation:
    """Every check of the planner: the shipped (fitted) runs in-sample, the same with each
    source left out of the fit (only with the built-in curves), measured runs, the published
    runs it does not model, the MoE runs and the runs found outside the shipped csv (both
    validation only, never fitted); `summary` gives each list's errors, `by_source` the shipped
    runs' per source (in-sample and left out)."""

    published: list[ValidationRow]
    leave_one_out: list[ValidationRow]
    measured: list[ValidationRow]
    not_modelled: tuple[UnmodelledRun, ...] = NOT_MODELLED
    moe: list[ValidationRow] = field(default_factory=list)  # MOE_RUNS: checked, not fitted
    found: list[ValidationRow] = field(default_factory=list)  # FOUND_RUNS: never fitted

    def summary(self) -> dict[str, dict[str, float]]:
        """error_summary of each list, by name."""
        return {"published": error_summary(self.published),
                "leave_one_source_out": error_summary(self.leave_one_out),
                "measured": error_summary(self.measured), "moe": error_summary(self.moe),
                "found": error_summary(self.found)}

    def by_source(self) -> dict[str, dict[str, float]]:
        """The published runs' errors per source and overall."""
        return errors_by_source(self.published)

    def by_source_left_out(self) -> dict[str, dict[str, float]]:
        """The same, each source predicted by curves fitted without it."""
        return errors_by_source(self.leave_one_out)

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON: the rows of each list and the summaries."""
        return {"published": [r.to_dict() for r in self.published],
                "leave_one_source_out": [r.to_dict() for r in self.leave_one_out],
                "measured": [r.to_dict() for r in self.measured],
                "moe": [r.to_dict() for r in self.moe],
                "by_source_moe": errors_by_source(self.moe),
                "found": [r.to_dict() for r in self.found],
                "by_source_found": errors_by_source(self.found),
                "by_precision_found": errors_by_precision(self.found),
                "not_modelled": [r.to_dict() for r in self.not_modelled],
                "summary": self.summary(), "by_source": self.by_source(),
                "by_source_left_out": self.by_source_left_out()}


def validate_all(measured_runs: list[MeasuredRun | Mapping[str, Any]],
                 efficiency: float | None = None) -> Validation:
    """The shipped runs, leave-one-source-out (with the built-in curves), the measured
    runs given (MeasuredRun, or mappings with MEASURED_RUN_KEYS), the published
    mixture-of-experts runs and the found runs (both checked only) and every run not modelled
    with its reason."""
    return Validation(validate_published(efficiency),
                      validate_leave_one_source_out() if efficiency is None else [],
                      validate_measured_runs(measured_runs, efficiency),
                      NOT_MODELLED + MOE_NOT_MODELLED, validate_published(efficiency, MOE_RUNS),
                      validate_found(efficiency))


def validate_found(efficiency: float | None = None) -> list[ValidationRow]:
    """The runs found outside the shipped csv, predicted with the curves fitted on every
    shipped run (or `efficiency`): out of sample by construction, as none of them is fitted."""
    return validate_published(efficiency, FOUND_RUNS)


# --- Intervals and the envelope: what the planner has been validated on ---


def row_stack(row: ValidationRow) -> str:
    """The software stack of a validation row: its framework's, or accelbench's own runtime
    for a measured run."""
    return STACKS.get(row.framework, OWN_STACK)


def row_residual(row: ValidationRow) -> Residual:
    """A validation row as a residual: log(predicted / observed) MFU (= tokens/s per device),
    its source, its stack and its run's conditions."""
    return Residual(math.log(row.predicted_mfu / row.observed_mfu), row.source_key,
                    conditions(class_of_key(row.device), row.dtype, row.limiter, row.n_devices),
                    f"{row.run_id} {row.name}".strip(), row_stack(row))


def interval_model(rows: list[ValidationRow], extra: tuple[Residual, ...] = (),
                   device: str = "") -> IntervalModel:
    """The intervals of out-of-sample rows (leave-one-source-out ones), with any further
    residuals; `device` names what they stand for beyond an unseen stack."""
    return IntervalModel(tuple(row_residual(r) for r in rows) + extra, device=device)


_SHIPPED: dict[str, object] = {}


def shipped_interval_model() -> IntervalModel:
    """The intervals of the shipped runs' leave-one-source-out residuals (computed once a
    process)."""
    if "sources" not in _SHIPPED:
        _SHIPPED["sources"] = interval_model(validate_leave_one_source_out())
    model = _SHIPPED["sources"]
    assert isinstance(model, IntervalModel)
    return model


def unseen_class_interval_model() -> IntervalModel:
    """The intervals of a device class no published run validates (or compute timed by a
    measured profile): the residuals of each class's runs predicted without any of its
    class's runs (validate_leave_one_class_out), computed once a process. Wider than the
    leave-one-source-out ones: a new class's efficiency is unknown, and so is its error."""
    if "unseen" not in _SHIPPED:
        _SHIPPED["unseen"] = interval_model(validate_leave_one_class_out(),
                                            device="a device class never validated")
    model = _SHIPPED["unseen"]
    assert isinstance(model, IntervalModel)
    return model


def validated_envelope(runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS) -> Envelope:
    """The envelope of the scored published runs: device class, precision, active parameters,
    devices, sequence and observed MFU of each."""
    return Envelope(tuple(
        ValidatedRun(f"{run.run_id} {run.name}".strip(), device_class(run.device),
                     precision_family(run.dtype), float(active_params(run.model)),
                     run.n_devices, run.seq_len, run.published_mfu()) for run in runs))
