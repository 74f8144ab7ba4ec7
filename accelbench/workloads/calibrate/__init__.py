"""Calibration, declared: `accelbench calibrate` times GEMMs, fused attention, memory bandwidth,
the loss, the embedding, the optimizer and collectives into one machine profile (the planner's
curves are analytics/machine_profile.py). Its folder: options.py (options and spec, torch-free),
run.py and the micro-benchmarks; each part below imports its module when called."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.config.records.profile import ProfileMetrics
from accelbench.config.workload import Workload
from accelbench.workloads.calibrate.options import CalibrateOptions

if TYPE_CHECKING:
    import torch

    from accelbench.bench.outcome import Outcome, Progress
    from accelbench.store.record import Record
    from accelbench.workloads.calibrate.options import CalibrateSpec


def build(options: CalibrateOptions) -> CalibrateSpec:
    """The checked spec (the device resolved, counts and ranks checked)."""
    from accelbench.workloads.calibrate.options import build_calibrate
    return build_calibrate(options)


def run(spec: CalibrateSpec, device: torch.device, progress: Progress | None = None) -> Outcome:
    """Every micro-benchmark, into one profile outcome."""
    from accelbench.workloads.calibrate.run import run_calibration
    return run_calibration(spec, device, progress)


def table(records: list[Record], title: str) -> Any:
    """A calibration's profile (its one record)."""
    from accelbench.report.stored_profile import profile_table
    return profile_table(records[0])


WORKLOAD = Workload(
    "calibrate", "Time GEMMs, fused attention, memory, the loss, embedding, optimizer and "
    "collectives;\nstore the profile.", CalibrateOptions, {"profile": ProfileMetrics},
    build=build, run=run, table=table, command_order=5, outputs=("db", "json_out", "wide"))
