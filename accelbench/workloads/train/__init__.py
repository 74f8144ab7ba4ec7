"""Training steps of a GPT model (the study's sequence-length, GAS and sparsity studies),
declared: `accelbench train`. The step loop, cells and launches are the shared training kit
(bench/train/, which genslm, scale and noise run too); this folder holds train's study plan
(plan.py, also the cells of the others' plans) and its report sections (seqlen.py, gas.py,
sparsity_section.py); each part below imports its module when called."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.bench.train.train_options import TrainOptions
from accelbench.config.records.peak import PeakMetrics
from accelbench.config.records.train import TrainMetrics
from accelbench.config.workload import Workload

if TYPE_CHECKING:
    from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
    from accelbench.bench.study_planner import Planner, SweepPlan
    from accelbench.bench.train.spec import TrainSpec
    from accelbench.report.content import Section
    from accelbench.report.machines import Machine
    from accelbench.store.record import Record

# The options one sweep takes as comma lists (build_spec's); an axis over any other option is
# one sweep per value.
TRAIN_AXES = ("seq", "micro_batch", "gas", "dtype", "recompute", "sparsity")
TRAINING_KINDS = {"train": TrainMetrics, "peak": PeakMetrics}  # what every training run writes


def build(options: TrainOptions) -> TrainSpec:
    """The checked spec (ConfigError naming the option, before anything runs)."""
    from accelbench.bench.train.train_options import build_spec
    return build_spec(options)


def run(spec: TrainSpec, sink: Sink, step: Any = None, cell: Progress | None = None,
        skip: Skip | None = None) -> list[Outcome]:
    """Every cell of the sweep (launched where its layout needs a group)."""
    from accelbench.bench.train.sweep import run_train_sweep
    return run_train_sweep(spec, sink, step, cell, skip)


def plan(values: dict[str, Any], planner: Planner) -> SweepPlan:
    """A study's training sweep, each cell's memory, fit and time planned."""
    from accelbench.workloads.train.study_plan import plan_train
    return plan_train(values, planner)


def table(records: list[Record], title: str) -> Any:
    """The table a training command prints (train, genslm, scale)."""
    from accelbench.report.table import train_table
    return train_table(records, title)


def seq_section(machines: list[Machine]) -> Section:
    """The report's sequence-length figure."""
    from accelbench.workloads.train.seqlen import seq_section as section
    return section(machines)


def gas_section(machines: list[Machine]) -> Section:
    """The report's gradient-accumulation figure."""
    from accelbench.workloads.train.gas import gas_section as section
    return section(machines)


def sparsity_section(machines: list[Machine]) -> Section:
    """The report's weight-sparsity figure."""
    from accelbench.workloads.train.sparsity_section import sparsity_section as section
    return section(machines)


WORKLOAD = Workload(
    "train", "Run real training steps and report tokens/s, TFLOPS, MFU, HFU, memory and "
    "loss.", TrainOptions, TRAINING_KINDS, build=build, run=run, table=table, plan=plan,
    sections=(seq_section, gas_section, sparsity_section), section_order=3, command_order=2,
    axes=TRAIN_AXES)
