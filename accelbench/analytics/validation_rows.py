"""Predicted against observed MFU, one row per run, and the errors of a set of rows; no torch."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.efficiency import device_class
from accelbench.analytics.found_runs import FOUND_RUNS
from accelbench.analytics.intervals import precision_family
from accelbench.analytics.planner import PlanResult, evaluate
from accelbench.analytics.published_csv import PUBLISHED_RUNS
from accelbench.analytics.published_run import PublishedRun
from accelbench.analytics.train_setup import TrainSetup
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.records.train import TrainFigure
from accelbench.config.vocab import GB
from accelbench.hardware.specs import DeviceSpec


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


def predict_laid_out(cfg: ModelConfig, device: DeviceSpec, n_devices: int, devices_per_node: int,
             setup: TrainSetup, layout: Layout, efficiency: float | None) -> PlanResult:
    """The planner's prediction for a run as it was laid out (published runs are checked
    against the arithmetic rules when loaded; a device variant takes its row's links)."""
    nodes = max(1, n_devices // devices_per_node)
    cluster = make_cluster(device, nodes, min(devices_per_node, n_devices))
    return evaluate(cfg, cluster, setup, layout, efficiency)


def run_setup(run: PublishedRun) -> TrainSetup:
    """What a published run trained, with its framework's overlap, fused kernels and
    data-parallel reduction width (published_run.BF16_REDUCE_BYTES)."""
    return TrainSetup(run.global_batch, run.seq_len, run.dtype,
                      fused_attention=run.fused_attention, overlap=run.overlap,
                      kernels=run.kernels, reduce_bytes=run.reduce_bytes)


def validate_published(efficiency: float | None = None,
                       runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS,
                       tops: dict[str, float] | None = None) -> list[ValidationRow]:
    """Each published run's predicted MFU against its published one (accelbench's formula),
    with the built-in curves, one large-GEMM efficiency for all, or `tops` by device class
    (fit_gemm_top's)."""
    rows = []
    for run in runs:
        eff = efficiency if tops is None else tops[device_class(run.device)]
        result = predict_laid_out(run.model, run.device, run.n_devices, run.devices_per_node,
                          run_setup(run), run.layout, eff)
        rows.append(ValidationRow(
            run.name, run.device.key, run.published_mfu(), result.step.mfu,
            result.step.tokens_per_s / run.n_devices, result.memory.total / GB,
            result.memory.fits, result.limiter, run.oracle_tag, run.setup_tag, run.source,
            run.oracle_kind, run.oracle_value, run.fused_attention, run.run_id, run.source_key,
            run.notes, result.step.fp8_peak_utilisation, run.framework, run.overlap,
            run.published_memory_gib, run.dtype, run.n_devices))
    return rows


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


def validate_found(efficiency: float | None = None) -> list[ValidationRow]:
    """The runs found outside the shipped csv, predicted with the curves fitted on every
    shipped run (or `efficiency`): out of sample by construction, as none of them is fitted."""
    return validate_published(efficiency, FOUND_RUNS)
