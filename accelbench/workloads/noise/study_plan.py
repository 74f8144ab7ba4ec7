"""A study's noise floor planned before it runs: the A/A check's two conditions as cells."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
from accelbench.bench.study_planner import Planner, SweepPlan
from accelbench.workloads.train.study_plan import train_cell


def plan_noise(values: dict[str, Any], planner: Planner) -> SweepPlan:
    """The noise floor's A/A check: its two conditions as cells, each over every trial (a
    check always measures now: resume skips none of it)."""
    from accelbench.workloads.noise.options import NoiseOptions
    from accelbench.workloads.noise.runner import CONDITIONS, build_noise_spec, run_noise

    spec = build_noise_spec(NoiseOptions(**values))
    train = spec.train
    (one,) = train.cells()
    planned = train_cell(planner, train, one, 1)
    cells = tuple(replace(planned, label=f"condition {name}", time_s=planned.time_s * spec.trials)
                  for name in CONDITIONS)

    def run(sink: Sink, on_cell: Progress | None, skip: Skip | None,
            peaks: tuple[SweepPeak, ...]) -> list[Outcome]:
        return run_noise(replace(spec, train=replace(train, peaks=peaks)), sink, None, on_cell)

    return SweepPlan(spec.title, cells, run, train.tf32, True)
