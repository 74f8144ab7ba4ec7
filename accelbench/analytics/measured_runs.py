"""Measured training runs as the planner is validated and calibrated on them; no torch."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.compute_rates import compute_efficiency
from accelbench.analytics.published_fit import solve_efficiency
from accelbench.analytics.train_setup import TrainSetup
from accelbench.analytics.validation_rows import ValidationRow, predict_laid_out
from accelbench.analytics.validation_shapes import resolve_shape
from accelbench.config.errors import checked_fields
from accelbench.config.layout import Layout
from accelbench.config.layout_parse import layout_from_fields, parse_layout_fields
from accelbench.config.model import ModelConfig
from accelbench.config.records.train import TrainFigure
from accelbench.config.vocab import GB
from accelbench.hardware.specs import get_spec


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
        result = predict_laid_out(cfg, device, n, gpn, setup, layout, efficiency)
        rows.append(ValidationRow(
            f"{getattr(model, 'name', model)} {n}x{device.key} {layout.label()}", device.key,
            float(run.mfu),
            result.step.mfu, result.step.tokens_per_s / n, result.memory.total / GB,
            result.memory.fits, result.limiter, "measured", "V", "accelbench results store",
            TrainFigure.MFU, float(run.mfu), True, source_key="measured", dtype=str(run.dtype),
            n_devices=n))
    return rows


def calibrate_efficiency(runs: list[MeasuredRun | Mapping[str, Any]]) -> dict[str, float]:
    """One compute efficiency per device key from measured runs: the median over its runs of
    the efficiency that makes the prediction match."""
    needed: dict[str, list[float]] = {}
    for run in map(measured_run_of, runs):
        device = get_spec(str(run.device_key))
        eff = solve_efficiency(lambda e, r=run: validate_measured_runs([r], e)[0].predicted_mfu,
                                float(run.mfu), compute_efficiency(device))
        needed.setdefault(device.key, []).append(eff)
    return {key: statistics.median(values) for key, values in needed.items()}
