"""Launching training cells on several processes, and the sweep driver for a process group.

`accelbench train --nproc N` (outside torchrun) starts each cell as its own torchrun launch of
this module: a dead or hung rank then costs one cell (recorded with the rank's error), never the
sweep. Under torchrun or srun the same command runs its cells on the group directly.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from accelbench.bench.guard import is_oom, memory_budget_bytes, refuse_if_too_big
from accelbench.bench.outcome import Outcome, Progress, Sink
from accelbench.bench.train import KIND, cell_spec
from accelbench.bench.train_dist import estimate_bytes_per_device, run_dist_cell
from accelbench.bench.train_spec import TrainCell, TrainSpec, spec_from_dict
from accelbench.config.errors import ConfigError
from accelbench.parallel.dist import init_distributed, read_env, teardown
from accelbench.parallel.launch import LaunchResult, launch_torchrun
from accelbench.parallel.layout import Layout, parse_layout, validate_layout


def in_process_group() -> bool:
    """True under torchrun or srun with more than one process."""
    return read_env().world_size > 1


def group_layout(spec: TrainSpec, world_size: int, gas: int) -> Layout:
    """The spec's layout (data parallel over the world when none is given), validated, and
    the options that several processes cannot honour refused."""
    layout = parse_layout(spec.layout) if spec.layout else Layout(dp=world_size)
    layout = validate_layout(layout, spec.model, world_size, gas)
    if world_size > 1:
        check_dist_options(spec, layout)
    return layout


def check_dist_options(spec: TrainSpec, layout: Layout) -> None:
    """Refuse, rather than silently ignore, what the multi-process path does not do."""
    if spec.max_micro_batch:
        raise ConfigError("max-micro-batch", "the largest-micro-batch search runs on one "
                          "process only, not with --nproc or under torchrun/srun",
                          "off; give --micro-batch values")
    if "fp16" in spec.dtypes and (layout.tp > 1 or layout.pp > 1):
        raise ConfigError("dtype", f"fp16 on layout {layout.label()}: its loss scaling is built "
                          "for data-parallel layouts only (the overflow check must agree on "
                          "every rank)", "fp32 or bf16 with tp/pp; fp16 with dp and zero 0-3")


def run_group_sweep(spec: TrainSpec, sink: Sink, progress: Progress | None = None,
                    on_cell: Progress | None = None) -> list[Outcome]:
    """Every cell on the process group; rank 0 sinks the outcomes, the other ranks return []."""
    device_type = None if spec.device == "auto" else spec.device.split(":")[0]
    info, device = init_distributed(device_type)
    outcomes: list[Outcome] = []
    cells = spec.cells()
    clean = False
    try:
        for i, cell in enumerate(cells):
            layout = group_layout(spec, info.world_size, cell.gas)
            if on_cell and info.rank == 0:
                on_cell(i, len(cells), f"{cell.label} on {layout.label()}")
            outcome = _refusal(spec, cell, layout, device) or run_dist_cell(
                spec, cell, layout, device, progress)
            if outcome is not None and info.rank == 0:
                sink(outcome)
                outcomes.append(outcome)
        clean = True
    finally:
        teardown(together=clean)
    return outcomes


def _refusal(spec: TrainSpec, cell: TrainCell, layout: Layout,
             device: torch.device) -> Outcome | None:
    """On a CPU all local ranks share the host's memory: refuse before allocating."""
    if device.type != "cpu" and spec.mem_limit_bytes is None:
        return None
    estimate = estimate_bytes_per_device(spec, cell, layout)
    budget = memory_budget_bytes(device, spec.mem_limit_bytes)
    local = read_env().world_size if device.type == "cpu" else 1  # standalone: one host
    reason = refuse_if_too_big(estimate * local, budget)
    if reason is None:
        return None
    record_spec = {**cell_spec(spec, cell, device), "layout": layout.to_dict(),
                   "world_size": read_env().world_size}
    return Outcome(KIND, "oom", record_spec, {"mem_estimate_bytes": estimate}, reason=reason)


def run_launched_sweep(spec: TrainSpec, sink: Sink,
                       on_cell: Progress | None = None) -> list[Outcome]:
    """Each cell as one torchrun launch of `spec.nproc` processes, bounded by cell_timeout_s."""
    outcomes = []
    cells = spec.cells()
    for i, cell in enumerate(cells):
        if on_cell:
            on_cell(i, len(cells), f"{cell.label} on {spec.nproc} processes")
        outcome = launch_cell(spec, cell)
        sink(outcome)
        outcomes.append(outcome)
    return outcomes


def rank_env(spec: TrainSpec) -> dict[str, str]:
    """On a CPU a device is one core: one thread per rank, also for a single rank (torchrun sets
    OMP_NUM_THREADS=1 only from two ranks up, which would give a one-rank baseline every core)."""
    on_cpu = spec.device.startswith("cpu") or (spec.device == "auto"
                                               and not torch.cuda.is_available())
    return {"OMP_NUM_THREADS": "1"} if on_cpu else {}


def launch_cell(spec: TrainSpec, cell: TrainCell) -> Outcome:
    """Run one cell under torchrun; its outcome, or the failed rank's error as the outcome.
    Every outcome records the cell's layout and world size (nproc)."""
    layout = group_layout(spec, spec.nproc, cell.gas)
    single = replace(spec, seq_lens=(cell.seq_len,), micro_batches=(cell.micro_batch,),
                     gas=(cell.gas,), dtypes=(cell.dtype,), recomputes=(cell.recompute,))
    with tempfile.TemporaryDirectory(prefix="accelbench-cell-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "outcome.json"
        spec_path.write_text(json.dumps(single.to_dict()))
        result = launch_torchrun(spec.nproc, ["-m", __name__, str(spec_path), str(out_path)],
                                 spec.cell_timeout_s, env=rank_env(spec))
        if out_path.exists():  # rank 0 wrote it after gathering every rank: keep the measurement
            return _with_exit_note(Outcome(**json.loads(out_path.read_text())), result)
    record_spec = {**cell_spec(spec, cell, torch.device("cpu")), "device": spec.device,
                   "layout": layout.to_dict(), "world_size": spec.nproc}
    rank = f"rank {result.failed_rank}: " if result.failed_rank is not None else ""
    return Outcome(KIND, failure_status(result), record_spec,
                   reason=f"{rank}{result.error}"[-2000:])


def failure_status(result: LaunchResult) -> str:
    """timeout (the deadline ended it), oom (the failed rank ran out of memory: a rank cannot
    record that itself while its peers wait in a collective) or error."""
    if result.timed_out:
        return "timeout"
    return "oom" if is_oom(RuntimeError(result.error)) else "error"


def _with_exit_note(outcome: Outcome, result: LaunchResult) -> Outcome:
    """A rank that failed after the outcome was complete (at teardown) is noted, not fatal."""
    if result.ok:
        return outcome
    rank = f"rank {result.failed_rank}" if result.failed_rank is not None else "a rank"
    how = "timed out" if result.timed_out else f"failed: {result.error}"
    note = f"measured in full; afterwards {rank} {how}"[-1000:]
    return replace(outcome, reason=f"{outcome.reason}; {note}" if outcome.reason else note)


def worker_main(spec_path: str, out_path: str) -> None:
    """A launched rank: run the one cell; rank 0 writes the outcome for the launcher."""
    spec = spec_from_dict(json.loads(Path(spec_path).read_text()))

    def write(outcome: Outcome) -> None:
        Path(out_path).write_text(json.dumps(vars(outcome), default=str))

    run_group_sweep(spec, write)


if __name__ == "__main__":
    worker_main(sys.argv[1], sys.argv[2])
