"""The transformer-block micro-benchmark (the study's figures 3-4), declared: `accelbench block`
times one block's forward and backward over batch x dtype. Its folder: options.py (torch-free),
runner.py (the sweep), plan.py (a study's sweep), report.py (the report's section); each part
below imports its module when called, so the declaration stays torch-free."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.config.records.block import BlockMetrics
from accelbench.config.records.peak import PeakMetrics
from accelbench.config.workload import Workload
from accelbench.workloads.block.options import BlockOptions

if TYPE_CHECKING:
    from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
    from accelbench.bench.study_planner import Planner, SweepPlan
    from accelbench.report.content import Section
    from accelbench.report.machines import Machine
    from accelbench.store.record import Record
    from accelbench.workloads.block.runner import BlockSpec

BLOCK_AXES = ("batch", "dtype")  # the options one block sweep takes as comma lists


def build(options: BlockOptions) -> BlockSpec:
    """The checked spec (ConfigError naming the option, before anything runs)."""
    from accelbench.workloads.block.runner import build_block_spec
    return build_block_spec(options)


def run(spec: BlockSpec, sink: Sink, step: object, cell: Progress | None = None,
        skip: Skip | None = None) -> list[Outcome]:
    """Every cell of the sweep, each outcome to `sink` as it exists."""
    from accelbench.workloads.block.runner import run_block
    return run_block(spec, sink, step, cell, skip)


def plan(values: dict[str, Any], planner: Planner) -> SweepPlan:
    """A study's block sweep, each cell's memory, fit and time planned."""
    from accelbench.workloads.block.study_plan import plan_block
    return plan_block(values, planner)


def table(records: list[Record], title: str) -> Any:
    """The table `accelbench block` prints."""
    from accelbench.report.table import block_table
    return block_table(records, title)


def section(machines: list[Machine]) -> Section:
    """The report's figures 3-4."""
    from accelbench.workloads.block.report import block_section
    return block_section(machines)


WORKLOAD = Workload(
    "block", "Time one transformer block's forward and backward over batch x dtype "
    "(study figs 3-4).", BlockOptions, {"block": BlockMetrics, "peak": PeakMetrics},
    build=build, run=run, table=table, plan=plan, sections=(section,), section_order=1,
    command_order=1, axes=BLOCK_AXES,
    outputs=("db", "json_out", "csv_out", "output", "rerun", "remeasure_peak", "wide"))
