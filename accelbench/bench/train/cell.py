"""One training cell on any layout: refused before it allocates, measured, or recorded with
why it could not run (unsupported, does not fit, diverged, timeout, error). Rank 0 makes the
outcome from every rank's results; one process is rank 0 of one."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.distributed as dist

from accelbench.analytics.flops import FORMULA
from accelbench.analytics.memory import CPU_WORKSPACE_BYTES, WORKSPACE_BYTES, MemoryBreakdown
from accelbench.analytics.runtime_memory import runtime_memory_per_device
from accelbench.bench.dtypes import dtype_support, set_tf32
from accelbench.bench.gemm_peak import Peak
from accelbench.bench.guard import guarded, refuse_if_too_big
from accelbench.bench.outcome import Outcome
from accelbench.bench.timed_metrics import peak_warning
from accelbench.bench.train.cell_metrics import cell_counts, cell_metrics
from accelbench.bench.train.rank_result import RankResult
from accelbench.bench.train.spec import TrainCell, TrainSpec, spec_for_cell
from accelbench.bench.train.steps import Diverged, StepProgress, run_rank_steps
from accelbench.config.fit import fit_basis
from accelbench.config.layout import Layout
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.train import TRAIN_SWEPT, TrainMetrics
from accelbench.config.runtime_settings import applied
from accelbench.hardware.detect import available_cpu_memory_bytes, resolve_device
from accelbench.parallel.context import placement
from accelbench.parallel.gather import gather_rank_results
from accelbench.parallel.topology import rank_place

KIND = "train"


VERIFIED = "--verify-fit ran it"


TOKEN_ID_BYTES = 8  # int64 token ids (data/loader.py)


def step_batch_bytes(cell: TrainCell) -> float:
    """The step's token ids a rank holds through the step, input and target: gas x micro-batch
    sequences each, stacked by the step loop (steps.py _step_batch). What GAS itself adds to a
    rank's memory: 2 GiB at gas 16,384, micro-batch 8, sequence 1024 (MAX_GAS)."""
    return 2 * TOKEN_ID_BYTES * cell.gas * cell.micro_batch * cell.seq_len


def estimate(spec: TrainSpec, cell: TrainCell, layout: Layout) -> MemoryBreakdown:
    """What one rank of this runtime holds at this cell's peak, in the widths it keeps
    (analytics/runtime_memory.py: fp32 weights, gradients and moments, DDP's buckets, FSDP2's
    unsharded blocks; the embedding and head whole on every tensor rank; a CPU cell without a
    device context's workspace: CPU_WORKSPACE_BYTES; the step's stacked token ids,
    step_batch_bytes)."""
    per_cell = Layout(**{**layout.to_dict(), "mb": cell.micro_batch,
                         "recompute": cell.recompute})
    on_cpu = resolve_device(spec.device).type == "cpu"  # selects; creates no device context
    workspace = (CPU_WORKSPACE_BYTES if on_cpu else WORKSPACE_BYTES) + step_batch_bytes(cell)
    return runtime_memory_per_device(spec.model, cell.seq_len, per_cell, cell.gas, cell.dtype,
                                     spec.runtime_settings, workspace,
                                     compute_weights=spec.compute_weights)


def estimate_bytes(spec: TrainSpec, cell: TrainCell, layout: Layout) -> float:
    """The per-device memory estimate of this cell on this layout, in bytes (estimate)."""
    return estimate(spec, cell, layout).total


def estimate_fields(spec: TrainSpec, cell: TrainCell, layout: Layout) -> tuple[float, dict]:
    """The estimate's bytes (estimate_bytes), and the record's estimate fields: those bytes,
    whose widths, and the moment they are the peak of."""
    breakdown, total = estimate(spec, cell, layout), estimate_bytes(spec, cell, layout)
    return total, dict(mem_estimate_bytes_per_rank=total, mem_estimate_widths=breakdown.widths,
                       mem_estimate_moment=breakdown.moment)


RUNTIME_SETTINGS = "runtime_settings"  # the record spec's field of the settings a cell used


def applied_settings(spec: TrainSpec, cell: TrainCell, layout: Layout) -> dict:
    """The lean data-parallel settings this cell's placed layout uses (cp ranks as dp ranks)."""
    return applied(spec.runtime_settings, placement(layout), cell.dtype, spec.model.is_moe)


def cell_spec(spec: TrainSpec, cell: TrainCell, layout: Layout, device: str) -> dict:
    """The full spec of one cell, as recorded: the shared fields, the cell's swept values, the
    layout and world size, and what a token is."""
    spec = spec_for_cell(spec, cell, layout.dp)  # a --tokens budget sets the cell's steps
    shared = spec.to_dict()
    for swept in TRAIN_SWEPT:
        shared.pop(swept)
    shared.pop("peaks")
    shared.pop("verify_fit")  # how a refusal was checked, not the cell: its reason says so
    shared.pop("runtime", None)  # kept as the settings this cell's layout used, if any:
    used = applied_settings(spec, cell, layout)  # a cell they do not touch keeps its fingerprint
    return {**shared, **({RUNTIME_SETTINGS: used} if used else {}),
            "workload": KIND, "model_name": spec.model.name,
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
    total, fields = estimate_fields(spec, cell, layout)
    reason = refuse_if_too_big(total, device, spec.mem_limit_bytes, local_ranks)
    if reason is None:
        return None
    metrics = TrainMetrics(**fields)
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
    total, fields = estimate_fields(spec, cell, layout)
    raw = {f"rank{r.rank}": r.raw() for r in ranks}
    bad = next((r for r in ranks if r.diverged_step is not None), None)
    if bad is not None:
        metrics = TrainMetrics(diverged_step=bad.diverged_step, **fields)
        return Outcome(KIND, "diverged", record_spec, metrics_dict(metrics), raw, bad.reason)
    if min(r.timed_steps for r in ranks) == 0:
        steps = len(ranks[0].step_times_s)
        return Outcome(KIND, "timeout", record_spec, raw=raw,
                       reason=f"time budget ended after {steps} steps, none timed past the "
                              f"{spec.warmup_steps} warm-up steps")
    backend = dist.get_backend() if dist.is_initialized() else "none"
    metrics = replace(cell_metrics(spec, cell, layout, counts, ranks, total, backend),
                      **fields)
    return Outcome(KIND, "ok", record_spec, metrics_dict(metrics), raw,
                   reason=notes(metrics))


def notes(metrics: TrainMetrics) -> str:
    """The reason line of a measured cell: a utilisation over 100%, and a slow rank with its
    evidence (the CLI table's note column and the report show it)."""
    slow = metrics.slow_rank_evidence if metrics.slow_rank is not None else ""
    return "; ".join(n for n in (peak_warning(metrics), slow) if n)
