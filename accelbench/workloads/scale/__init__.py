"""Device scaling (the study's table II), declared: `accelbench scale` runs one training cell at
each device count, weak or strong, and reports speedup and scaling efficiency. Its folder:
options.py, runner.py, plan.py, report.py; each part below imports its module when called."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.config.records.scale import ScaleMetrics
from accelbench.config.workload import Workload
from accelbench.workloads.scale.options import SCALE_DEFAULTS, SCALE_SKIPS, ScaleOptions
from accelbench.workloads.train import TRAINING_KINDS
from accelbench.workloads.train import table as training_table

if TYPE_CHECKING:
    from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
    from accelbench.bench.study_planner import Planner, SweepPlan
    from accelbench.report.content import Section
    from accelbench.report.machines import Machine
    from accelbench.workloads.scale.runner import ScaleSpec

SCALE_AXES = ("devices",)  # a scaling study is one cell at several counts


def build(options: ScaleOptions) -> ScaleSpec:
    """The checked base cell and its device counts."""
    from accelbench.workloads.scale.options import build_scale_spec
    return build_scale_spec(options)


def run(scale: ScaleSpec, sink: Sink, step: object = None, on_cell: Progress | None = None,
        skip: Skip | None = None) -> list[Outcome]:
    """One launched cell a device count, the counts interleaved over trials."""
    from accelbench.workloads.scale.runner import run_scale_sweep
    return run_scale_sweep(scale, sink, step, on_cell, skip)


def plan(values: dict[str, Any], planner: Planner) -> SweepPlan:
    """A study's scaling sweep over the counts this machine has."""
    from accelbench.workloads.scale.study_plan import plan_scale
    return plan_scale(values, planner)


def section(machines: list[Machine]) -> Section:
    """The report's table II."""
    from accelbench.workloads.scale.report import scaling_section
    return scaling_section(machines)


WORKLOAD = Workload(
    "scale", "Run one training cell at each device count and report table II's columns.",
    ScaleOptions, {**TRAINING_KINDS, "scale": ScaleMetrics}, build=build, run=run,
    table=training_table, plan=plan, sections=(section,), section_order=2, axes=SCALE_AXES,
    command_order=4, defaults=SCALE_DEFAULTS, skip=SCALE_SKIPS)
