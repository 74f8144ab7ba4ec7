"""One training cell on any layout: refused before it allocates, measured, or recorded with
why it could not run (unsupported, does not fit, diverged, timeout, error). Rank 0 makes the
outcome from every rank's results; one process is rank 0 of one."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.distributed as dist

from accelbench.analytics.flops import FORMULA
from accelbench.analytics.memory import (
    CPU_WORKSPACE_BYTES,
    RUNTIME_KERNELS,
    WORKSPACE_BYTES,
    memory_per_device,
)
from accelbench.bench.dtypes import dtype_support, set_tf32
from accelbench.bench.guard import guarded, refuse_if_too_big
from accelbench.bench.metrics import peak_warning
from accelbench.bench.outcome import Outcome
from accelbench.bench.peak import Peak
from accelbench.bench.train.metrics import cell_counts, cell_metrics
from accelbench.bench.train.rank_result import RankResult
from accelbench.bench.train.spec import TrainCell, TrainSpec, spec_for_cell
from accelbench.bench.train.steps import Diverged, StepProgress, run_rank_steps
from accelbench.config.fit import fit_basis
from accelbench.config.layout import Layout
from accelbench.config.schema import TRAIN_SWEPT, TrainMetrics, metrics_dict
from accelbench.hardware.detect import available_cpu_memory_bytes, resolve_device
from accelbench.parallel.gather import gather_rank_results
from accelbench.parallel.topology import rank_place

KIND = "train"


VERIFIED = "--verify-fit ran it"


def estimate_bytes(spec: TrainSpec, cell: TrainCell, layout: Layout) -> float:
    """The planner's per-device memory estimate for this cell on this layout (the embedding,
    head and logits whole on every tensor rank, as this runtime keeps them; a CPU cell without
    a device context's workspace: CPU_WORKSPACE_BYTES)."""
    per_cell = Layout(**{**layout.to_dict(), "mb": cell.micro_batch,
                         "recompute": cell.recompute})
    on_cpu = resolve_device(spec.device).type == "cpu"  # selects; creates no device context
    # fp8: activations and the saved GEMM inputs stay bf16 (torchao keeps them for backward)
    return memory_per_device(spec.model, cell.seq_len, per_cell, cell.gas,
                             spec.precision(cell).compute,
                             fused_attention=True, vocab_parallel=False,
                             kernels=RUNTIME_KERNELS, workspace_bytes=CPU_WORKSPACE_BYTES if on_cpu
                             else WORKSPACE_BYTES).total


def cell_spec(spec: TrainSpec, cell: TrainCell, layout: Layout, device: str) -> dict:
    """The full spec of one cell, as recorded: the shared fields, the cell's swept values, the
    layout and world size, and what a token is."""
    spec = spec_for_cell(spec, cell, layout.dp)  # a --tokens budget sets the cell's steps
    shared = spec.to_dict()
    for swept in TRAIN_SWEPT:
        shared.pop(swept)
    shared.pop("peaks")
    shared.pop("verify_fit")  # how a refusal was checked, not the cell: its reason says so
    return {**shared, "workload": KIND, "model_name": spec.model.name,
            **{name: getattr(cell, name) for name in TRAIN_SWEPT.values()},
            "device": device, "layout": layout.to_dict(), "world_size": layout.world_size,
            "token_unit": spec.token_unit, "flops_formula": FORMULA,
            "fp8_recipe": spec.precision(cell).fp8_recipe}


def refusal(spec: TrainSpec, cell: TrainCell, layout: Layout, device: torch.device,
            local_ranks: int) -> Outcome | None:
    """An outcome without running: a dtype the device lacks, or one rank's estimate over one
    rank's budget (bench/guard.py: --mem-limit per device; on a CPU the local ranks share the
    host's memory). None when the cell may run."""
    record_spec = cell_spec(spec, cell, layout, str(device))
    unsupported = dtype_support(device, cell.dtype)
    if unsupported:
        return Outcome(KIND, "unsupported", record_spec, reason=unsupported)
    estimate = estimate_bytes(spec, cell, layout)
    reason = refuse_if_too_big(estimate, device, spec.mem_limit_bytes, local_ranks)
    if reason is None:
        return None
    metrics = TrainMetrics(mem_estimate_bytes_per_rank=estimate)
    return Outcome(KIND, "oom", record_spec, metrics_dict(metrics), reason=reason)


def verifiable(first: Outcome, device: torch.device) -> bool:
    """Whether a refusal may be run to confirm it (--verify-fit): refused by the estimate, not a
    user budget, and on a CPU only while the estimate is under the host's available memory (a
    process over it is killed by the kernel, not told)."""
    if fit_basis(first.status, first.reason) != "estimated":
        return False
    estimate = first.typed.mem_estimate_bytes_per_rank or 0.0
    return device.type != "cpu" or estimate < available_cpu_memory_bytes()


def run_cell(spec: TrainSpec, cell: TrainCell, layout: Layout, device: torch.device,
             peak: Peak, progress: StepProgress | None = None,
             local_ranks: int = 1, verify_fit: bool = False) -> Outcome | None:
    """Measure one cell on every rank; rank 0 returns the outcome, the others None. With
    `verify_fit` a cell the estimate refuses is run anyway, its reason saying so.

    In a group of several ranks an out-of-memory error is not caught here: peers may be inside
    a collective, so the rank exits and the launcher records 'oom' from its error text.
    """
    spec = spec_for_cell(spec, cell, layout.dp)  # a --tokens budget sets the cell's steps
    first = refusal(spec, cell, layout, device, local_ranks)
    if first is not None and verify_fit and verifiable(first, device):
        return _verified(first, guarded(KIND, first.spec, device, lambda: _measure(
            spec, cell, layout, device, peak, progress, first.spec)))
    if first is not None:
        return first if _rank() == 0 else None
    record_spec = cell_spec(spec, cell, layout, str(device))
    if dist.is_initialized() and dist.get_world_size() > 1:
        return _measure(spec, cell, layout, device, peak, progress, record_spec)
    return guarded(KIND, record_spec, device,
                   lambda: _measure(spec, cell, layout, device, peak, progress, record_spec))


def _verified(first: Outcome, ran: Outcome) -> Outcome:
    """A refused cell run to confirm it: what it measured, with what the estimate said."""
    said = f"{VERIFIED}: the estimate had refused it ({first.reason})"
    return replace(ran, reason=f"{ran.reason}; {said}" if ran.reason else said)


def _rank() -> int:
    """This process's global rank (0 without a group)."""
    return dist.get_rank() if dist.is_initialized() else 0


def _measure(spec: TrainSpec, cell: TrainCell, layout: Layout, device: torch.device,
             peak: Peak, progress: StepProgress | None, record_spec: dict) -> Outcome | None:
    """Every rank's steps, gathered; rank 0's outcome."""
    set_tf32(device, spec.tf32)
    counts = cell_counts(spec, cell, layout, peak)
    try:
        local = run_rank_steps(spec, cell, layout, device, counts, progress)
    except Diverged as err:
        local = RankResult(rank=_rank(), step_times_s=err.log.step_time_s, loss=err.log.loss,
                           diverged_step=err.step, reason=str(err))
    local.place = rank_place()
    ranks = gather_rank_results(local)
    if _rank() != 0:
        return None
    estimate = estimate_bytes(spec, cell, layout)
    raw = {f"rank{r.rank}": r.raw() for r in ranks}
    bad = next((r for r in ranks if r.diverged_step is not None), None)
    if bad is not None:
        metrics = TrainMetrics(diverged_step=bad.diverged_step,
                               mem_estimate_bytes_per_rank=estimate)
        return Outcome(KIND, "diverged", record_spec, metrics_dict(metrics), raw, bad.reason)
    if min(r.timed_steps for r in ranks) == 0:
        steps = len(ranks[0].step_times_s)
        return Outcome(KIND, "timeout", record_spec, raw=raw,
                       reason=f"time budget ended after {steps} steps, none timed past the "
                              f"{spec.warmup_steps} warm-up steps")
    backend = dist.get_backend() if dist.is_initialized() else "none"
    metrics = cell_metrics(spec, cell, layout, counts, ranks, estimate, backend)
    return Outcome(KIND, "ok", record_spec, metrics_dict(metrics), raw,
                   reason=peak_warning(metrics))
