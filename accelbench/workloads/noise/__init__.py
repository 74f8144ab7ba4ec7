"""The noise floor, declared: `accelbench noise` measures one training configuration as two
identical conditions interleaved over trials (an A/A check) and their difference with its
interval. Its folder: options.py (torch-free), runner.py, plan.py, report.py (its table and
section; the floor every comparison states is report/noise_floor.py); each part below imports
its module when called."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.config.records.noise import NoiseMetrics
from accelbench.config.records.peak import PeakMetrics
from accelbench.config.records.train import TrainMetrics
from accelbench.config.workload import Workload
from accelbench.workloads.noise.options import NoiseOptions

if TYPE_CHECKING:
    from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
    from accelbench.bench.study_planner import Planner, SweepPlan
    from accelbench.report.content import Section
    from accelbench.report.machines import Machine
    from accelbench.store.record import Record
    from accelbench.workloads.noise.runner import NoiseSpec


def build(options: NoiseOptions) -> NoiseSpec:
    """The checked A/A spec."""
    from accelbench.workloads.noise.runner import build_noise_spec
    return build_noise_spec(options)


def run(spec: NoiseSpec, sink: Sink, step: Any = None, cell: Progress | None = None,
        skip: Skip | None = None) -> list[Outcome]:
    """The two conditions interleaved over trials, then their difference."""
    from accelbench.workloads.noise.runner import run_noise
    return run_noise(spec, sink, step, cell, skip)


def plan(values: dict[str, Any], planner: Planner) -> SweepPlan:
    """A study's noise floor (accelbench run measures it)."""
    from accelbench.workloads.noise.study_plan import plan_noise
    return plan_noise(values, planner)


def table(records: list[Record], title: str) -> Any:
    """The table `accelbench noise` prints."""
    from accelbench.workloads.noise.report import noise_table
    return noise_table(records, title)


def section(machines: list[Machine]) -> Section:
    """The report's noise-floor section."""
    from accelbench.workloads.noise.report import noise_section
    return noise_section(machines)


WORKLOAD = Workload(
    "noise", "The noise floor: one training configuration measured as two identical "
    "conditions,\ninterleaved over trials, and their difference with its interval.",
    NoiseOptions, {"noise": NoiseMetrics, "noise-cell": TrainMetrics, "peak": PeakMetrics},
    build=build, run=run, table=table, plan=plan, sections=(section,), section_order=5,
    command_order=6,
    outputs=("db", "json_out", "csv_out", "output", "wide"))  # no --rerun: always measures
