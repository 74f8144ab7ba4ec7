"""A study's scaling sweep planned before it runs: one cell a device count this machine has,
the others left out with a note."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
from accelbench.bench.study_planner import Planner, SweepPlan, available_devices
from accelbench.bench.train.train_options import build_spec
from accelbench.bench.trials import resolve_trials
from accelbench.config.units import parse_int_list
from accelbench.workloads.scale.options import ScaleOptions
from accelbench.workloads.scale.runner import (
    ScaleSpec,
    run_scale,
    spec_at,
    summary_outcome,
    validate_scale,
)
from accelbench.workloads.train.study_plan import train_cell


def plan_scale(values: dict[str, Any], planner: Planner) -> SweepPlan:
    options = ScaleOptions(**values)
    base = build_spec(options)
    counts = parse_int_list("devices", options.devices)
    present, what = available_devices(planner.device)
    kept = tuple(n for n in counts if n <= present)
    left = [n for n in counts if n > present]
    note = (f"device counts {', '.join(map(str, left))} left out: this machine has {what}"
            if left else "")
    scale = validate_scale(ScaleSpec(base, kept or (1,), options.mode, options.zero))
    title = f"{base.model.name} {scale.mode} scaling over {list(kept)} device(s)"
    if not kept:
        return SweepPlan(title, (), lambda *args: [], note=note)
    cells = []
    trials = resolve_trials(base.trials, planner.device)  # each a launch of every count
    for n in kept:
        spec = spec_at(scale, n)
        cell = train_cell(planner, spec, spec.cells()[0], n, f"{n} device(s)", local=False)
        cells.append(replace(cell, time_s=cell.time_s * trials))

    def run(sink: Sink, on_cell: Progress | None, skip: Skip | None,
            peaks: tuple[SweepPeak, ...]) -> list[Outcome]:
        return run_scale(scale, sink, on_cell, skip)  # its peaks: one thread a rank

    return SweepPlan(title, tuple(cells), run, base.tf32, False,
                     lambda cells: summary_outcome(scale, cells), note)
