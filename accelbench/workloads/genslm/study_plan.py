"""A study's GenSLM sweep planned before it runs: a training sweep on codons, or its
longest-sequence search."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelbench.bench.study_planner import Planner, SweepPlan
from accelbench.workloads.genslm.options import GenslmOptions, build_genslm_spec
from accelbench.workloads.train.study_plan import plan_training


def plan_genslm(values: dict[str, Any], planner: Planner) -> SweepPlan:
    options = GenslmOptions(**values)
    spec = build_genslm_spec(replace(options, longest_seq=False))  # the plan checks the search
    return plan_training(spec, planner, longest=options.longest_seq)
