"""A training sweep, whatever runs it: this process (one device), the process group it is in
(torchrun or srun), or a torchrun launch per cell (--nproc N, or a layout that needs a group).
Everything about the sweep is checked before the first cell, so bad input stops it (exit 2)
before a banner, a results file or a measurement."""

from __future__ import annotations

from dataclasses import replace

import torch

from accelbench.bench.gemm_peak import SweepPeaks
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip, finished
from accelbench.bench.train.batches import check_data
from accelbench.bench.train.build import needs_group
from accelbench.bench.train.cell import KIND, cell_spec, refusal, verifiable
from accelbench.bench.train.cell_trials import LocalCell, combine_train_trials
from accelbench.bench.train.dense_ref import DenseReference
from accelbench.bench.train.launch import (
    in_process_group,
    join_user_launch,
    run_group_sweep,
    run_launched_sweep,
)
from accelbench.bench.train.spec import (
    TrainCell,
    TrainSpec,
    cell_layout,
    cell_steps,
    validate_train_spec,
)
from accelbench.bench.train.steps import StepProgress
from accelbench.bench.trials import CellTrials, interleave, resolve_trials
from accelbench.config.errors import ConfigError
from accelbench.hardware.detect import resolve_device
from accelbench.parallel.dist import read_env


def world_size(spec: TrainSpec) -> int:
    """Processes the sweep's cells run on: the group this process is in, or --nproc."""
    return read_env().world_size if in_process_group() else spec.nproc


def check_sweep(spec: TrainSpec) -> TrainSpec:
    """Every check that needs no measurement: fields, data, and the layout of every cell."""
    validate_train_spec(spec)
    if in_process_group() and spec.nproc not in (1, world_size(spec)):
        raise ConfigError("nproc", f"{spec.nproc} ranks asked for, but the launcher started "
                          f"{world_size(spec)}", f"{world_size(spec)}, or leave it out under "
                          "torchrun or srun")
    check_data(spec)
    if in_process_group() and spec.trials not in (None, 1):
        raise ConfigError("trials", f"{spec.trials} trials under torchrun or srun: a trial is "
                          "its own process group (a fresh launch), and this process is in the "
                          "launcher's one group", "1 or auto under torchrun/srun; for trials, "
                          "run accelbench with --nproc N outside them")
    for gas in spec.gas:
        cell_layout(spec, world_size(spec), gas)
    if spec.tokens is not None:
        for cell in spec.cells():
            layout = cell_layout(spec, world_size(spec), cell.gas)
            steps = cell_steps(spec, cell, layout.dp)
            if steps <= spec.warmup_steps:
                raise ConfigError("tokens", f"{spec.tokens} tokens are {steps} step(s) of cell "
                                  f"{cell.label}, not more than the {spec.warmup_steps} warm-up "
                                  "steps", "a larger budget or fewer --warmup-steps")
    return spec


def run_train_sweep(spec: TrainSpec, sink: Sink, progress: StepProgress | None = None,
                    on_cell: Progress | None = None, skip: Skip | None = None) -> list[Outcome]:
    """Every cell in turn; each outcome (and each measured peak) goes to `sink` as it exists;
    a cell `skip` reports finished is returned without running."""
    check_sweep(spec)
    ref = DenseReference()  # sparse cells against the sweep's dense cell (speedup, loss)
    if in_process_group():
        join_user_launch()
        outcomes = run_group_sweep(replace(spec, trials=1), ref.sink(sink), progress, on_cell,
                                   skip)
    elif launched(spec):
        outcomes = run_launched_sweep(spec, ref.sink(sink), on_cell, skip)
    else:
        outcomes = run_local_sweep(spec, ref.sink(sink), progress, on_cell, skip)
    return [ref.annotate(o) for o in outcomes]


def launched(spec: TrainSpec) -> bool:
    """Whether the sweep's cells run on several processes (a group, or a launch per cell)."""
    return in_process_group() or spec.nproc > 1 or needs_group(spec.layout_for(1))


def local_cells(spec: TrainSpec) -> list[TrainCell]:
    """The sweep's cells; with --max-micro-batch one per (dtype, recompute, seq, gas)."""
    cells = spec.cells()
    if not spec.max_micro_batch:
        return cells
    unique = {replace(c, micro_batch=1) for c in cells}
    return sorted(unique, key=lambda c: (c.dtype, c.recompute, c.seq_len, c.gas))


def _series(cell: TrainCell) -> tuple:
    """The cells --verify-fit checks one refusal of: all but the sequence length."""
    return (cell.dtype, cell.recompute, cell.micro_batch, cell.gas, cell.sparsity)


def _to_verify(spec: TrainSpec, cell: TrainCell, device: torch.device) -> bool:
    """Whether --verify-fit runs this cell: the estimate refuses it, and it may be run."""
    refused = refusal(spec, cell, cell_layout(spec, 1, cell.gas), device, 1)
    return refused is not None and verifiable(refused, device)


def run_local_sweep(spec: TrainSpec, sink: Sink, progress: StepProgress | None = None,
                    on_cell: Progress | None = None, skip: Skip | None = None) -> list[Outcome]:
    """The cells on this process's device (the layout of one device), spec.trials trials each
    (auto: per device), interleaved round by round in an order seeded by --seed
    (bench/trials.py); `skip` is asked before the micro-batch search and the peak, so a
    finished cell costs neither. With --verify-fit the first cell of each series the estimate
    refuses is run (also one refused before)."""
    device = resolve_device(spec.device)
    spec = replace(spec, trials=resolve_trials(spec.trials, device))
    peaks = SweepPeaks(device, spec.tf32, sink, known=spec.peaks)
    cells = local_cells(spec)
    outcomes: list[Outcome | None] = []
    to_run, verified = [], set()
    for cell in cells:
        asked = cell_spec(spec, cell, cell_layout(spec, 1, cell.gas), str(device))
        verify = spec.verify_fit and _series(cell) not in verified and \
            _to_verify(spec, cell, device)
        outcome = None if verify else finished(skip, KIND, asked)  # one refused before: run it
        if outcome is not None:
            peaks.adopt(outcome)
        else:
            run = LocalCell(spec, cell, device, peaks, progress, asked, verify)
            to_run.append(CellTrials(cell.label, run.trial, combine_train_trials, KIND, asked,
                                     run.adopt))
        if verify:  # the series' first refusal is checked: that is all
            verified.add(_series(cell))
        outcomes.append(outcome)
    skipped = len(cells) - len(to_run)
    measured = iter(interleave(to_run, spec.trials, spec.seed, sink, on_cell, skipped))
    return [o if o is not None else next(measured) for o in outcomes]
