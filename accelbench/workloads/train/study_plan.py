"""A study's training sweep planned before it runs (train, and genslm's, noise's and scale's
cells): memory per rank, fit, rough time; the longest-sequence search by estimate or by trial."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelbench.analytics.flops import hardware_flops_per_token
from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip
from accelbench.bench.study_planner import PlannedCell, Planner, SweepPlan, available_devices
from accelbench.bench.train.build import needs_group
from accelbench.bench.train.cell import estimate_bytes
from accelbench.bench.train.launch import in_process_group
from accelbench.bench.train.search import find_longest_seq, run_longest_seq_sweep, search_cells
from accelbench.bench.train.spec import TrainCell, TrainSpec, cell_layout
from accelbench.bench.train.sweep import local_cells, run_train_sweep, world_size
from accelbench.bench.train.train_options import TrainOptions, build_spec
from accelbench.bench.trials import resolve_trials


def train_cell(planner: Planner, spec: TrainSpec, cell: TrainCell, world: int,
                label: str | None = None, local: bool = True) -> PlannedCell:
    """A training cell on `world` processes: memory per rank, model plus recompute FLOPs per
    rank over every step."""
    layout = cell_layout(spec, world, cell.gas)
    tokens = cell.micro_batch * cell.gas * cell.seq_len * spec.steps  # per replica
    flops = hardware_flops_per_token(spec.model, cell.seq_len, cell.recompute) * tokens
    flops /= layout.tp * layout.pp
    return planner.cell(label or cell.label, cell.dtype, estimate_bytes(spec, cell, layout),
                        spec.mem_limit_bytes, flops, spec.tf32, spec.steps * cell.gas, local,
                        world)


def plan_training(spec: TrainSpec, planner: Planner, longest: bool) -> SweepPlan:
    """A train or genslm sweep: in this process, or launched (--nproc, a layout that needs a
    group); or the longest-sequence search."""
    title = f"{spec.model.name} {spec.benchmark}, data {spec.data}"
    if longest:
        return _plan_longest(spec, planner, title)
    local = spec.nproc == 1 and not needs_group(spec.layout_for(1)) and not in_process_group()
    world = world_size(spec)
    cells = local_cells(spec) if local else spec.cells()
    trials = 1 if in_process_group() else resolve_trials(spec.trials, planner.device)
    planned = [train_cell(planner, spec, c, world, local=local) for c in cells]
    planned = [replace(p, time_s=p.time_s * trials) for p in planned]
    if spec.max_micro_batch:
        planned = [replace(p, verdict=f"{p.verdict} at mb 1; the largest that fits is "
                           "searched") for p in planned]

    def run(sink: Sink, on_cell: Progress | None, skip: Skip | None,
            peaks: tuple[SweepPeak, ...]) -> list[Outcome]:
        return run_train_sweep(replace(spec, peaks=peaks) if local else spec, sink, None,
                               on_cell, skip)

    return SweepPlan(title, tuple(planned), run, spec.tf32, local)


def _plan_longest(spec: TrainSpec, planner: Planner, title: str) -> SweepPlan:
    """The longest-sequence search: by the memory estimate on a CPU or under mem_limit (worked
    out now, as the run will), by trial steps on an accelerator (known only when it runs)."""
    cells = []
    by_estimate = planner.device.type == "cpu" or spec.mem_limit_bytes is not None
    for cell in search_cells(spec):
        start = f"from seq {cell.seq_len} mb {cell.micro_batch} {cell.dtype}"
        if by_estimate:
            seq, _ = find_longest_seq(spec, cell, planner.device)
            if seq == 0:
                planned = train_cell(planner, spec, cell, 1)
                cells.append(replace(planned, label=f"longest seq {start}: none fits",
                                     verdict="does not fit", time_s=0.0))
                continue
            planned = train_cell(planner, spec, replace(cell, seq_len=seq), 1)
            cells.append(replace(planned, label=f"longest seq {start}: {seq} (estimate)"))
        else:
            planned = train_cell(planner, spec, cell, 1)
            cells.append(replace(planned, label=f"longest seq {start} (trial steps)",
                                 verdict="searched by trial", time_s=planned.time_s * 4))

    def run(sink: Sink, on_cell: Progress | None, skip: Skip | None,
            peaks: tuple[SweepPeak, ...]) -> list[Outcome]:
        return run_longest_seq_sweep(replace(spec, peaks=peaks), sink, None, on_cell, skip)

    return SweepPlan(f"{title}, longest sequence", tuple(cells), run, spec.tf32, True)


def plan_train(values: dict[str, Any], planner: Planner) -> SweepPlan:
    spec = build_spec(TrainOptions(**values))
    present, what = available_devices(planner.device)
    if spec.nproc > present and not in_process_group():  # as plan_scale leaves counts out
        title = f"{spec.model.name} {spec.benchmark} on {spec.nproc} device(s)"
        return SweepPlan(title, (), lambda *args: [], note=(
            f"layout {spec.layout or spec.nproc} left out: {spec.nproc} device(s), this "
            f"machine has {what}"))
    return plan_training(spec, planner, longest=False)
