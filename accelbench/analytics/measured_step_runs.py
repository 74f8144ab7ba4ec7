"""The planner against this machine's own measured runs, through its measured profile: the
predicted step time of each block, training and multi-process cell against the measured one;
no torch.

A run comes as a plain dict (report/measured_steps.py reads them from the store): kind
("block", "train"), model (a ModelConfig), seq_len, micro_batch, gas, dtype, n_devices, layout
(dict), recompute, threads (torch threads a process ran with) and measured_s (the median
step, or the block's forward + backward), record_id. The profile of the same thread count
times the compute; a multi-process cell takes its collectives from a profile that measured
them (collectives run one thread a rank).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.analytics.activations import RUNTIME_KERNELS
from accelbench.analytics.cluster import ClusterSpec
from accelbench.analytics.efficiency import ProfileRates, layer_cost
from accelbench.analytics.intervals import Residual, conditions
from accelbench.analytics.machine_profile import MachineProfile
from accelbench.analytics.steptime import estimate_step
from accelbench.analytics.train_setup import TrainSetup
from accelbench.config.errors import ConfigError, checked_fields
from accelbench.config.layout import Layout
from accelbench.config.layout_parse import layout_from_fields
from accelbench.config.model import ModelConfig
from accelbench.config.precision import resolve
from accelbench.config.record_kinds import carries
from accelbench.config.records.block import BlockMetrics
from accelbench.hardware.specs import DeviceSpec

STEP_RUN_KEYS = ("kind", "model", "seq_len", "micro_batch", "dtype", "threads", "measured_s")


@dataclass(frozen=True)
class StepRun:
    """One measured cell of this machine (report/measured_steps.py reads them from a store): a
    block's forward + backward or a training step, its shape, precision, devices, layout, the
    torch threads a process had and the measured seconds of that unit."""

    kind: str  # "block" or "train"
    model: ModelConfig
    seq_len: int
    micro_batch: int
    dtype: str
    threads: int = 1
    measured_s: float | None = None
    gas: int = 1
    n_devices: int = 1
    layout: dict[str, Any] = field(default_factory=dict)
    recompute: str = "none"
    record_id: int | None = None

    @property
    def one_layer(self) -> bool:
        """A block cell's run (its kind's records are BlockMetrics): one layer's forward and
        backward, not a training step."""
        return carries(self.kind, BlockMetrics)

def step_run_of(run: StepRun | Mapping[str, Any], required: tuple[str, ...] = ()) -> StepRun:
    """A run as StepRun; a mapping (a hand-written run) gives its fields by name, `required`
    among them (ConfigError otherwise), the others their defaults where left out or None."""
    if isinstance(run, StepRun):
        return run
    return checked_fields(StepRun, run, required, "measured run", keep_none=False)

# This machine's cells ran one torch thread per core (a launched rank: one thread, as many
# ranks as cores); gloo's reduction then has no idle core to overlap on: nothing is hidden.
CPU_OVERLAP = "none"


@dataclass(frozen=True)
class StepRow:
    """Predicted against measured seconds of one measured cell."""

    name: str
    kind: str  # "block", "train" (one process) or "multi-process"
    measured_s: float
    predicted_s: float
    profile: str
    record_id: int | None = None
    dtype: str = "fp32"
    n_devices: int = 1

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_s - self.measured_s) / self.measured_s

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON."""
        return {**self.__dict__, "error": self.error}


def profile_device(profile: MachineProfile) -> DeviceSpec:
    """A device row for a measured machine: its peaks are the profile's (what its efficiency
    curves are fractions of), its memory unbounded (step time only is predicted here)."""
    return DeviceSpec(f"profile:{profile.device_type}", profile.device_name or "measured",
                      "", profile.device_type or "cpu",
                      {k: v / 1e12 for k, v in profile.peaks_flops_per_s.items()}, 1e6, None,
                      "", None, profile.source)


def with_collectives(compute: MachineProfile, profiles: list[MachineProfile]) -> MachineProfile:
    """`compute`, with the collective curves and latencies of the first profile that has
    them when it has none."""
    if compute.latency_s:
        return compute
    for other in profiles:
        if other.latency_s:
            curves = {k: c for k, c in other.curves.items() if k.startswith("collective:")}
            return replace(compute, curves={**compute.curves, **curves},
                           latency_s=other.latency_s, collective_ranks=other.collective_ranks)
    return compute


def without_blocks(profile: MachineProfile) -> MachineProfile:
    """The profile less its measured whole-layer (block) curves."""
    curves = {k: c for k, c in profile.curves.items() if not k.startswith("block:")}
    return profile if len(curves) == len(profile.curves) else replace(profile, curves=curves)


def pick_profile(profiles: dict[int, MachineProfile], threads: int) -> MachineProfile:
    """The profile measured at `threads` torch threads (one line naming those there are)."""
    if threads not in profiles:
        raise ConfigError("profile", f"no profile measured at {threads} threads",
                          ", ".join(f"{t} threads" for t in sorted(profiles)) or "none")
    return profiles[threads]


def _layout(run: StepRun) -> Layout:
    """The run's layout (fields it leaves out: the runtime's defaults) at its micro-batch."""
    fields = {k: v for k, v in dict(run.layout or {}).items()
              if k in Layout.__dataclass_fields__}
    tp, pp = int(fields.get("tp", 1)), int(fields.get("pp", 1))
    fields.setdefault("dp", max(1, int(run.n_devices) // (tp * pp)))
    fields["mb"] = int(run.micro_batch)
    fields["recompute"] = run.recompute
    return layout_from_fields(fields)


def predict_step_s(run: StepRun | Mapping[str, Any], profile: MachineProfile) -> float:
    """Predicted seconds of the run's measured unit: a block's forward + backward (one layer,
    its whole batch), or a training step on one node of n_devices ranks."""
    run = step_run_of(run)
    cfg, dtype = run.model, str(run.dtype)
    if run.one_layer:  # never from block curves: they may be made of this very cell
        cost = layer_cost(ProfileRates(without_blocks(profile), dtype), cfg,
                          int(run.seq_len), int(run.micro_batch), 1, 1, False, dtype, True)
        return cost.model
    layout = _layout(run)
    n = layout.world_size
    cluster = ClusterSpec(profile_device(profile), n, 1, 1.0, 0.0, 1.0, 0.0, profile=profile)
    setup = TrainSetup(layout.dp * layout.mb * int(run.gas), int(run.seq_len),
                       dtype, fused_attention=True, overlap=CPU_OVERLAP,
                       kernels=RUNTIME_KERNELS)
    return estimate_step(cfg, cluster, setup, layout).step_s


def validate_measured_steps(runs: list[StepRun | Mapping[str, Any]],
                            profiles: dict[int, MachineProfile]) -> list[StepRow]:
    """Each measured cell's predicted against measured seconds, through the profile of the
    thread count it ran with (a mapping must give STEP_RUN_KEYS)."""
    rows = []
    for run in (step_run_of(r, STEP_RUN_KEYS) for r in runs):
        profile = pick_profile(profiles, int(run.threads))
        n = int(run.n_devices)
        if n > 1:
            profile = with_collectives(profile, list(profiles.values()))
        kind = run.kind if run.one_layer else ("multi-process" if n > 1 else "train")
        name = (f"{run.model.name} {kind} s={run.seq_len} b={run.micro_batch}"
                + (f" {_layout(run).label()}" if n > 1 else ""))
        rows.append(StepRow(name, kind, float(run.measured_s), predict_step_s(run, profile),
                            profile.source, run.record_id, str(run.dtype), n))
    return rows


def missing_precision(run: StepRun | Mapping[str, Any],
                      profiles: dict[int, MachineProfile]) -> str | None:
    """Why a cell cannot be predicted through the profile of its thread count: the profile
    measured no GEMM curve of the cell's precision (`calibrate` measures fp32 and bf16 by
    default; the study also makes fp16 cells). These cells run on a device with no datasheet
    row (a CPU), so there is no datasheet model to fall back on and no peak is invented: the
    cell is left out with this reason. None when the profile has the curve (or is absent:
    pick_profile says so)."""
    run = step_run_of(run)
    profile = profiles.get(int(run.threads))
    dtype = str(run.dtype)
    peak = resolve(dtype).peak  # an fp8 cell's GEMM curve is its bf16 one
    if profile is None or peak in profile.peaks_flops_per_s:
        return None
    measured = ", ".join(sorted(profile.peaks_flops_per_s)) or "none"
    return (f"record {run.record_id}: a {dtype} {run.kind} cell, and the "
            f"{run.threads}-thread profile has no {peak} GEMM curve (it measured {measured}); "
            f"{profile.device_type or 'this device'} has no datasheet row to fall back on, so "
            f"the cell is not predicted (accelbench calibrate --dtype {peak} measures one)")


def step_errors(rows: list[StepRow]) -> dict[str, dict[str, float]]:
    """Median and worst |error| per kind and overall."""
    out: dict[str, dict[str, float]] = {}
    for kind in [*dict.fromkeys(r.kind for r in rows), "overall"]:
        errors = [abs(r.error) for r in rows if kind in ("overall", r.kind)]
        if errors:
            out[kind] = {"n": len(errors), "median_abs_error": statistics.median(errors),
                         "worst_abs_error": max(errors)}
    return out


MEASURED_CLASS = "measured profile"  # the device class of cells timed through a profile


def step_residual(row: StepRow) -> Residual:
    """A measured cell as an interval residual: log(predicted / observed) throughput, which is
    log(measured / predicted) seconds; its source is the profile that timed it, its limiter
    the cell's kind."""
    return Residual(math.log(row.measured_s / row.predicted_s), f"profile: {row.profile}",
                    conditions(MEASURED_CLASS, row.dtype, row.kind, row.n_devices), row.name)
