"""The training benchmark on many processes (inside torchrun or srun): one cell on a layout.

Every rank builds the same model (same seed, same initial checkpoint), places it with
accelbench.parallel, trains on its data-parallel share, and times its own steps; rank 0 decides
when a time budget ends (all ranks stop at the same step), gathers the ranks' results and makes
the one outcome: counts summed, memory kept per rank with its maximum, throughput never averaged
(global tokens over the slowest rank's median step time), spread from the slowest rank's steps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from accelbench.analytics.cluster import Layout as PlanLayout
from accelbench.analytics.flops import hardware_flops_per_token, model_flops_per_token
from accelbench.analytics.memory import memory_per_device
from accelbench.analytics.metrics import tflops, utilisation
from accelbench.analytics.params import total_params
from accelbench.bench.dtypes import TORCH_DTYPES, dtype_support, set_tf32
from accelbench.bench.memory import PeakMemory
from accelbench.bench.optim import lr_at
from accelbench.bench.outcome import Outcome, Progress
from accelbench.bench.peak import resolve_peak
from accelbench.bench.timing import PhaseTimer, summarize
from accelbench.bench.train import KIND, Diverged, StepLog, cell_spec
from accelbench.bench.train_data import open_batches
from accelbench.bench.train_spec import TrainCell, TrainSpec
from accelbench.hardware.detect import detect_spec
from accelbench.models.convert_hf_gpt2 import load_checkpoint_dir, load_hf_gpt2_state_dict
from accelbench.models.gpt import GPT
from accelbench.parallel.apply import micro_batch_context, prepare_model
from accelbench.parallel.collectives import (
    bubble_fraction_theory,
    busiest_rank_comm_bytes,
    ideal_comm_bytes_per_step,
    profile_collectives,
)
from accelbench.parallel.dist import make_mesh, mean_over_replicas, mesh_coords
from accelbench.parallel.gather import combine_rank_results, gather_rank_results
from accelbench.parallel.layout import Layout
from accelbench.parallel.optim import clip_grad_norm_, make_optimizer
from accelbench.parallel.pipeline import PipelineRunner

GRAD_BYTES_PER_PARAM = 4  # gradients stay fp32: autocast keeps fp32 master weights


def estimate_bytes_per_device(spec: TrainSpec, cell: TrainCell, layout: Layout) -> float:
    """The planner's per-device memory estimate for this cell on this layout."""
    plan = PlanLayout(dp=layout.dp, tp=layout.tp, pp=layout.pp, vp=layout.vp,
                      mb=cell.micro_batch, zero=layout.zero, recompute=cell.recompute,
                      sp=bool(layout.sp))
    return memory_per_device(spec.model, cell.seq_len, plan, cell.gas, cell.dtype,
                             fused_attention=True, vocab_parallel=False).total


@dataclass
class _Trainer:
    """What one rank steps: the placed model (module or PipelineRunner), its optimizer, and the
    fp16 loss scaler (a no-op for other precisions)."""

    module: object
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler


def _build(spec: TrainSpec, cell: TrainCell, layout: Layout, device: torch.device) -> _Trainer:
    """The model, loaded from the initial checkpoint on every rank before it is split, placed
    on the mesh; its optimizer and loss scaler."""
    torch.manual_seed(spec.seed)
    model = GPT(spec.model)
    if spec.init_checkpoint:
        load_hf_gpt2_state_dict(model, load_checkpoint_dir(spec.init_checkpoint))
    model = model.to(device)
    mesh = make_mesh(layout, device)
    if layout.pp > 1:
        module = PipelineRunner(model, layout, mesh, cell.gas, device, cell.recompute,
                                spec.compile)
    else:
        module = prepare_model(model, layout, mesh, cell.recompute, spec.compile)
    optimizer = make_optimizer(module, layout, spec.lr, spec.weight_decay)
    # fp16 runs only on data-parallel layouts (train_launch.check_dist_options), where every
    # gradient is whole or an FSDP shard, so found-inf agrees on all ranks.
    scaler = torch.amp.GradScaler(device.type, enabled=cell.dtype == "fp16")
    return _Trainer(module, optimizer, scaler)


def _forward_backward(trainer: _Trainer, cell: TrainCell, layout: Layout, x: torch.Tensor,
                      y: torch.Tensor, device: torch.device) -> torch.Tensor | None:
    """Forward and backward of one optimizer step's batch on this rank; its loss or None."""
    autocast = (torch.autocast(device.type, dtype=TORCH_DTYPES[cell.dtype])
                if cell.dtype != "fp32" else nullcontext())
    module = trainer.module
    if layout.pp > 1:
        with autocast:
            return module.step(x, y)
    total = torch.zeros((), device=device)
    for i, (xs, ys) in enumerate(zip(x.chunk(cell.gas), y.chunk(cell.gas), strict=True)):
        with micro_batch_context(module, is_last=i == cell.gas - 1):
            with autocast:
                _, loss = module(xs, ys)
            trainer.scaler.scale(loss / cell.gas).backward()
        total += loss.detach() / cell.gas
    return total


def _optimizer_step(trainer: _Trainer, layout: Layout, grad_clip: float) -> None:
    """Unscale (fp16), clip to the global norm (0: off), step unless fp16 overflowed, zero."""
    trainer.scaler.unscale_(trainer.optimizer)
    if grad_clip > 0:
        clip_grad_norm_(trainer.module, grad_clip, layout)
    trainer.scaler.step(trainer.optimizer)
    trainer.scaler.update()
    trainer.optimizer.zero_grad(set_to_none=True)


def _step_batch(batches, cell: TrainCell) -> tuple[torch.Tensor, torch.Tensor]:
    """GAS micro-batches stacked: the whole step's batch of this data-parallel rank."""
    pairs = [batches.next() for _ in range(cell.gas)]
    return torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])


@contextmanager
def _maybe_profile(enabled: bool, device: torch.device, out: dict) -> Iterator[None]:
    """Time in collectives of one step (torch.profiler), written into `out`, when enabled."""
    if not enabled:
        yield
        return
    with profile_collectives(device) as comm:
        yield
    out.update(time_s=comm.time_s, source=f"{comm.source}, last warm-up step")


def _run_step(spec: TrainSpec, cell: TrainCell, layout: Layout, device: torch.device,
              trainer: _Trainer, batches, step: int, log: StepLog, collectives: dict) -> None:
    """One timed optimizer step; its time, global loss, lr and data wait go into `log`."""
    lr = lr_at(step, spec.lr, spec.lr_warmup_steps, spec.steps, spec.min_lr_ratio)
    for group in trainer.optimizer.param_groups:
        group["lr"] = lr
    timer = PhaseTimer(device)
    # The profiler's overhead stays out of the timed steps: it watches the last warm-up.
    profiled = step == spec.warmup_steps - 1
    with timer.phase("step"), _maybe_profile(profiled, device, collectives):
        t0 = time.perf_counter()  # inside the step, as on one device: a data stall is slower
        x, y = _step_batch(batches, cell)
        log.data_wait_s.append(time.perf_counter() - t0)
        loss = _forward_backward(trainer, cell, layout, x, y, device)
        _optimizer_step(trainer, layout, spec.grad_clip)
    log.step_time_s.append(timer.times_s()["step"][0])
    log.loss.append(mean_over_replicas(loss, layout, device))
    log.lr.append(lr)


def stop_together(budget_s: float | None, started: float, device: torch.device) -> bool:
    """Rank 0 decides whether the time budget has run out and every rank gets its answer, so
    all ranks stop after the same step (each rank's own clock could disagree)."""
    if not budget_s:
        return False
    over = dist.get_rank() == 0 and time.perf_counter() - started > budget_s
    flag = torch.tensor([1 if over else 0], dtype=torch.int32, device=device)
    dist.broadcast(flag, src=0)
    return bool(flag.item())


def run_rank_steps(spec: TrainSpec, cell: TrainCell, layout: Layout, device: torch.device,
                   progress: Progress | None) -> dict:
    """This rank's steps; returns what rank 0 needs to combine (times, losses, memory)."""
    log, collectives = StepLog(), {"time_s": None, "source": "not profiled (no warm-up step)"}
    with PeakMemory(device) as peak_mem:
        trainer = _build(spec, cell, layout, device)
        coords = mesh_coords(trainer.module.parallel_mesh)
        batches = open_batches(replace(spec, seed=spec.seed + coords["dp"]), cell, device)
        started = time.perf_counter()
        for step in range(spec.steps):
            _run_step(spec, cell, layout, device, trainer, batches, step, log, collectives)
            if progress and dist.get_rank() == 0:
                progress(step + 1, spec.steps, f"{log.step_time_s[-1] * 1e3:9.1f} ms  "
                         f"loss {log.loss[-1]:.4f}")
            if not math.isfinite(log.loss[-1]):  # the global loss: every rank stops here
                raise Diverged(step + 1, log.loss[-1], log)  # 1-based, as on one device
            if stop_together(spec.time_budget_s, started, device):
                break
        batches.close()
    timed = log.step_time_s[spec.warmup_steps:]
    return {"rank": dist.get_rank(), **coords, "tokens": cell.micro_batch * cell.gas * cell.seq_len,
            "samples": cell.micro_batch * cell.gas, "timed_steps": len(timed),
            "step_time_s": summarize(timed).median_s if timed else None,
            "step_times_s": log.step_time_s, "loss": log.loss, "lr": log.lr,
            "data_wait_s": log.data_wait_s, "collective_s": collectives["time_s"],
            "collective_source": collectives["source"], "mem_peak_bytes": peak_mem.peak_bytes,
            "mem_base_bytes": peak_mem.base_bytes}


def step_time_spread(ranks: list[dict], warmup_steps: int) -> dict:
    """Median and spread over the timed steps of the slowest rank (largest median): the rank
    that sets the pace of a synchronous step, so its median is what throughput divides by."""
    slowest = max(ranks, key=lambda r: r["step_time_s"])
    stats = summarize(slowest["step_times_s"][warmup_steps:])
    waits = slowest["data_wait_s"][warmup_steps:]
    return {"timed_steps": stats.count, "few_samples": stats.few_samples,
            "step_time_s_median": stats.median_s, "step_time_s_min": stats.min_s,
            "step_time_s_max": stats.max_s, "step_time_s_iqr": stats.iqr_s,
            "step_time_slowest_rank": slowest["rank"],
            "data_wait_fraction": sum(waits) / sum(stats.times_s)}


def comm_metrics(spec: TrainSpec, cell: TrainCell, layout: Layout) -> dict:
    """Bytes per step: what this implementation sends (the busiest pipeline position's ranks)
    and, for comparison, Megatron's ideal volume the planner assumes."""
    pp_rank, sent = busiest_rank_comm_bytes(spec.model, layout, cell.seq_len, cell.micro_batch,
                                            cell.gas, cell.dtype, cell.recompute,
                                            dist.get_backend())
    grad_bytes = GRAD_BYTES_PER_PARAM * total_params(spec.model) / (layout.tp * layout.pp)
    ideal = ideal_comm_bytes_per_step(spec.model, layout, cell.seq_len, cell.micro_batch,
                                      cell.gas, cell.dtype, grad_bytes, cell.recompute)
    return {"comm_bytes_per_step_per_rank": sent, "comm_bytes_pp_rank": pp_rank,
            "comm_bytes_per_step_ideal_per_rank": ideal}


def dist_metrics(spec: TrainSpec, cell: TrainCell, layout: Layout, ranks: list[dict],
                 device: torch.device) -> dict:
    """One record's metrics from every rank's results."""
    combined = combine_rank_results(ranks, model_parallel_size=layout.tp * layout.pp)
    n = len(ranks)
    t = combined["step_time_s_median_max_rank"]
    tokens = combined["tokens_global"]
    model_flops = model_flops_per_token(spec.model, cell.seq_len).total * tokens
    hw_flops = hardware_flops_per_token(spec.model, cell.seq_len, cell.recompute,
                                        early_stop=True) * tokens
    peak = resolve_peak(detect_spec(device), device, cell.dtype, spec.tf32)
    return {
        **combined, **step_time_spread(ranks, spec.warmup_steps), "n_devices": n,
        "tokens_per_step": tokens,
        "samples_per_s_per_device": combined["samples_per_s_global"] / n,
        "model_flops_per_step": model_flops, "hardware_flops_per_step": hw_flops,
        "tflops_per_device": tflops(model_flops / n, t),
        "mfu": utilisation(model_flops / n, t, peak.flops_per_s),
        "hfu": utilisation(hw_flops / n, t, peak.flops_per_s),
        "peak_flops_per_s": peak.flops_per_s, "peak_label": peak.label,
        "peak_precision": peak.precision,
        "collective_time_s_per_rank": [r["collective_s"] for r in ranks],
        "collective_time_source": ranks[0]["collective_source"],
        "pipeline_bubble_theory": bubble_fraction_theory(layout.pp, cell.gas, layout.vp),
        **comm_metrics(spec, cell, layout),
        "loss_first": ranks[0]["loss"][0], "loss_last": ranks[0]["loss"][-1],
        "mem_estimate_bytes": estimate_bytes_per_device(spec, cell, layout),
        **_worst_rank_memory(ranks),
    }


def _worst_rank_memory(ranks: list[dict]) -> dict:
    """Peak and base memory of the rank that added the most (what the estimate bounds)."""
    known = [r for r in ranks if r.get("mem_peak_bytes") is not None]
    if not known:
        return {}
    worst = max(known, key=lambda r: r["mem_peak_bytes"] - r["mem_base_bytes"])
    return {"mem_peak_bytes": worst["mem_peak_bytes"], "mem_base_bytes": worst["mem_base_bytes"],
            "mem_peak_rank": worst["rank"]}


def run_dist_cell(spec: TrainSpec, cell: TrainCell, layout: Layout, device: torch.device,
                  progress: Progress | None = None) -> Outcome | None:
    """Run one cell on every rank; rank 0 returns the combined outcome, the others None.

    An out-of-memory error is not caught here: peers may be inside a collective, so the rank
    exits and the launcher records the cell as 'oom' from that rank's error text.
    """
    record_spec = {**cell_spec(spec, cell, device), "layout": layout.to_dict(),
                   "world_size": dist.get_world_size()}
    unsupported = dtype_support(device, cell.dtype)  # the same answer on every rank
    if unsupported:
        outcome = Outcome(KIND, "unsupported", record_spec, reason=unsupported)
        return outcome if dist.get_rank() == 0 else None
    set_tf32(device, spec.tf32)
    try:
        local = run_rank_steps(spec, cell, layout, device, progress)
    except Diverged as err:
        local = {"diverged_step": err.step, "reason": str(err)}
    ranks = gather_rank_results(local)
    if dist.get_rank() != 0:
        return None
    return rank_zero_outcome(spec, cell, layout, device, record_spec, ranks)


def rank_zero_outcome(spec: TrainSpec, cell: TrainCell, layout: Layout, device: torch.device,
                      record_spec: dict, ranks: list[dict]) -> Outcome:
    """The cell's outcome from every rank's results: diverged, timeout (the time budget ended
    within the warm-up, so no step was timed) or ok with the combined metrics."""
    if any("diverged_step" in r for r in ranks):
        bad = next(r for r in ranks if "diverged_step" in r)
        return Outcome(KIND, "diverged", record_spec, {"diverged_step": bad["diverged_step"]},
                       reason=bad["reason"])
    raw = {f"rank{r['rank']}": {k: r[k] for k in ("step_times_s", "loss", "collective_s")}
           for r in ranks}
    if min(r["timed_steps"] for r in ranks) == 0:
        steps = len(ranks[0]["step_times_s"])
        return Outcome(KIND, "timeout", record_spec, raw=raw,
                       reason=f"time budget ended after {steps} steps, none timed past the "
                              f"{spec.warmup_steps} warm-up steps")
    return Outcome(KIND, "ok", record_spec, dist_metrics(spec, cell, layout, ranks, device), raw)
