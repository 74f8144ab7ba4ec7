"""GenSLM, the genome language model (the study's table IV), declared: `accelbench genslm`
trains on codon tokens of real genomes, or searches the longest sequence that fits. It runs the
shared training kit (bench/train/); its folder: options.py, plan.py, report.py; each part
below imports its module when called."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.config.records.seq_search import SeqSearchMetrics
from accelbench.config.workload import Workload
from accelbench.workloads.genslm.options import GENSLM_DEFAULTS, GenslmOptions
from accelbench.workloads.train import TRAIN_AXES, TRAINING_KINDS
from accelbench.workloads.train import run as run_training
from accelbench.workloads.train import table as training_table

if TYPE_CHECKING:
    from accelbench.bench.study_planner import Planner, SweepPlan
    from accelbench.bench.train.spec import TrainSpec
    from accelbench.report.content import Section
    from accelbench.report.machines import Machine


def build(options: GenslmOptions) -> TrainSpec:
    """The checked codon-token spec (a search it cannot run refused here)."""
    from accelbench.workloads.genslm.options import build_genslm_spec
    return build_genslm_spec(options)


def plan(values: dict[str, Any], planner: Planner) -> SweepPlan:
    """A study's GenSLM sweep or longest-sequence search, planned."""
    from accelbench.workloads.genslm.study_plan import plan_genslm
    return plan_genslm(values, planner)


def section(machines: list[Machine]) -> Section:
    """The report's table IV."""
    from accelbench.workloads.genslm.report import genslm_section
    return genslm_section(machines)


WORKLOAD = Workload(
    "genslm", "GenSLM training on genomes: codons/s, TFLOPS, MFU, HFU, memory, loss; "
    "longest sequence.", GenslmOptions, {**TRAINING_KINDS, "seq-search": SeqSearchMetrics},
    build=build, run=run_training, table=training_table, plan=plan, sections=(section,),
    section_order=4, command_order=3, axes=TRAIN_AXES, defaults=GENSLM_DEFAULTS)
