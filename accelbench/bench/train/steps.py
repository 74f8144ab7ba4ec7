"""The one step loop of a training cell, on one rank of any layout (one process is one rank).

Each step: the step's GAS micro-batches (the data wait is inside the timed step: a stall slows
it), forward and backward (autocast for fp16/bf16, loss scaling for fp16), the global gradient
norm clipped, AdamW, the learning-rate schedule. Rank 0 decides when a time budget ends, so all
ranks stop after the same step. The first warmup_steps are run but left out of the summary.
A launched rank installs a heartbeat (`set_heartbeat`) that each phase reports to, so the
launcher's watchdog can tell a hung cell from a slow one and name where a rank stopped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace

import torch
import torch.distributed as dist

from accelbench.bench.dtypes import TORCH_DTYPES
from accelbench.bench.lr_schedule import lr_at
from accelbench.bench.peak_memory import PeakMemory
from accelbench.bench.timing import PhaseTimer, summarize, synchronize
from accelbench.bench.train.batches import open_batches
from accelbench.bench.train.build import Trainer, build_trainer
from accelbench.bench.train.cell_metrics import CellCounts, StepReport, step_report
from accelbench.bench.train.hooks import hook_results
from accelbench.bench.train.rank_result import RankResult
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.bench.train.straggler import (
    blocked_clock,
    compute_clock,
    measures_compute,
    spin,
    test_delay_fraction,
)
from accelbench.bench.window_probe import WindowProbe
from accelbench.config.layout import Layout
from accelbench.hardware.energy import open_meter
from accelbench.parallel.apply import micro_batch_context
from accelbench.parallel.collective_time import all_to_all_time_s, profile_collectives
from accelbench.parallel.dist import mean_over_replicas
from accelbench.parallel.optim import clip_grad_norm_

Heartbeat = Callable[[int, str], None]  # (step, 1-based; phase) -> None
_heartbeat: list[Heartbeat] = []


def set_heartbeat(beat: Heartbeat | None) -> None:
    """What this rank calls at each phase of its steps (None: nothing, the default)."""
    _heartbeat[:] = [beat] if beat is not None else []


def _beat(step: int, phase: str) -> None:
    for beat in _heartbeat:
        beat(step, phase)


@dataclass
class StepLog:
    """Per-step raw measurements of one rank."""

    step_time_s: list[float] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    data_wait_s: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    compute_s: list[float] = field(default_factory=list)  # CPU seconds of forward+backward
    wait_s: list[float] = field(default_factory=list)  # seconds the step loop was blocked
    delay_s: float = 0.0  # the last step's test-only spin (ACCELBENCH_TEST_SLOW_RANK)


class Diverged(Exception):
    """The loss became NaN or infinite at `step` (1-based, as the per-step reports count)."""

    def __init__(self, step: int, loss: float, log: StepLog) -> None:
        super().__init__(f"loss {loss} at step {step}")
        self.step, self.log = step, log


def _rank() -> int:
    """This process's global rank (0 without a group)."""
    return dist.get_rank() if dist.is_initialized() else 0


def _forward_backward(trainer: Trainer, cell: TrainCell, layout: Layout, x: torch.Tensor,
                      y: torch.Tensor, device: torch.device) -> torch.Tensor | None:
    """Forward and backward of one optimizer step's batch on this rank; its loss or None
    (a pipeline rank that holds no loss)."""
    # fp8: bf16 autocast; the converted layers' GEMMs run in float8 inside (models/float8.py)
    compute = trainer.precision.autocast
    autocast = (torch.autocast(device.type, dtype=TORCH_DTYPES[compute])
                if compute else nullcontext())
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


def _optimizer_step(trainer: Trainer, layout: Layout, grad_clip: float) -> None:
    """Unscale (fp16), clip to the global norm (0: off), step unless fp16 overflowed, zero."""
    trainer.scaler.unscale_(trainer.optimizer)
    if grad_clip > 0:
        clip_grad_norm_(trainer.module, grad_clip, layout)
    trainer.scaler.step(trainer.optimizer)
    trainer.scaler.update()
    for hook in trainer.hooks:  # sparsity: masked weights and their AdamW moments stay zero
        hook.after_optimizer_step(trainer)
    trainer.optimizer.zero_grad(set_to_none=True)


def _step_batch(batches, cell: TrainCell) -> tuple[torch.Tensor, torch.Tensor]:
    """GAS micro-batches stacked: the whole step's batch of this data-parallel rank."""
    if cell.gas == 1:
        return batches.next()
    pairs = [batches.next() for _ in range(cell.gas)]
    return torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])


@contextmanager
def _maybe_profile(enabled: bool, device: torch.device, out: dict,
                   pipeline: bool = False) -> Iterator[None]:
    """Time in collectives (and in all-to-all) of one step (torch.profiler), written into
    `out`, when enabled."""
    if not enabled:
        yield
        return
    with profile_collectives(device) as comm:
        yield
    out.update(time_s=comm.time_s, source=f"{comm.source}, last warm-up step",
               all_to_all_s=all_to_all_time_s(comm, pipeline))


def _test_delay(log: StepLog, device: torch.device) -> None:
    """The test-only slow rank: spin for its fraction of this rank's last step's compute."""
    fraction = test_delay_fraction(_rank())
    if fraction and log.compute_s and measures_compute(device):
        log.delay_s = fraction * (log.compute_s[-1] - log.delay_s)
        spin(log.delay_s)


def run_step(spec: TrainSpec, cell: TrainCell, layout: Layout, device: torch.device,
              trainer: Trainer, batches, step: int, log: StepLog, collectives: dict) -> None:
    """One timed optimizer step; its time, global loss, lr and data wait go into `log`. The
    step runs on the layout the weights are placed by (context parallel ranks as dp ranks)."""
    layout = trainer.placed or layout
    lr = lr_at(step, spec.lr, spec.lr_warmup_steps, spec.steps, spec.min_lr_ratio)
    for group in trainer.optimizer.param_groups:
        group["lr"] = lr
    timer = PhaseTimer(device)
    # The profiler's overhead stays out of the timed steps: it watches the last warm-up step,
    # and only where there are collectives to watch.
    profiled = dist.is_initialized() and step == spec.warmup_steps - 1
    blocked = blocked_clock() if measures_compute(device) else None
    with timer.phase("step"), _maybe_profile(profiled, device, collectives, layout.pp > 1):
        t0 = time.perf_counter()
        x, y = _step_batch(batches, cell)
        log.data_wait_s.append(time.perf_counter() - t0)
        _beat(step + 1, "forward/backward")
        compute_started = compute_clock()
        _test_delay(log, device)  # tests only: ACCELBENCH_TEST_SLOW_RANK slows one rank
        loss = _forward_backward(trainer, cell, layout, x, y, device)
        if measures_compute(device):  # the rank's own work, not its waits (straggler.py)
            log.compute_s.append(compute_clock() - compute_started)
        _beat(step + 1, "optimizer")
        _optimizer_step(trainer, layout, spec.grad_clip)
    log.step_time_s.append(timer.times_s()["step"][0])
    if blocked is not None:  # waiting in collectives or for data, timed by the kernel
        log.wait_s.append(blocked_clock() - blocked)
    _beat(step + 1, "loss all-reduce")
    log.loss.append(mean_over_replicas(loss, layout, device))
    log.lr.append(lr)


def stop_together(budget_s: float | None, started: float, device: torch.device) -> bool:
    """Rank 0 decides whether the time budget has run out and every rank gets its answer, so
    all ranks stop after the same step (each rank's own clock could disagree)."""
    if not budget_s:
        return False
    over = _rank() == 0 and time.perf_counter() - started > budget_s
    if not dist.is_initialized():
        return over
    flag = torch.tensor([1 if over else 0], dtype=torch.int32, device=device)
    dist.broadcast(flag, src=0)
    return bool(flag.item())


StepProgress = Callable[[StepReport], None]


def _edge(mark: Callable[[], object], device: torch.device) -> None:
    """An edge of the energy window, once the device has finished the work before it."""
    synchronize(device)
    mark()


def run_rank_steps(spec: TrainSpec, cell: TrainCell, layout: Layout, device: torch.device,
                   counts: CellCounts, progress: StepProgress | None) -> RankResult:
    """Build, then run this rank's steps; returns what rank 0 combines (times, losses,
    memory). Raises Diverged when the global loss is not finite (every rank at the same step)."""
    log, collectives = StepLog(), {"time_s": None, "source": "not profiled"}
    probe = WindowProbe(device, spec.disturbance_threshold)  # outside the energy window
    with PeakMemory(device) as peak_mem, open_meter(device) as meter:
        _beat(0, "building the model")
        trainer = build_trainer(spec, cell, layout, device)
        batches = open_batches(replace(spec, seed=spec.seed + trainer.coords["dp"]), cell, device)
        started = time.perf_counter()
        for step in range(spec.steps):
            _beat(step + 1, "data")
            if step == spec.warmup_steps:  # energy, load, disturbance: the timed steps only
                _edge(probe.start, device)
                meter.start()
                for hook in trainer.hooks:  # MoE: the expert load counts afresh
                    hook.timed()
            run_step(spec, cell, layout, device, trainer, batches, step, log, collectives)
            if progress and _rank() == 0:
                progress(step_report(counts, step + 1, spec.steps, log.step_time_s[-1],
                                     log.loss[-1], log.lr[-1], log.data_wait_s[-1],
                                     peak_mem.current_peak_bytes()))
            if not math.isfinite(log.loss[-1]):
                raise Diverged(step + 1, log.loss[-1], log)
            if stop_together(spec.time_budget_s, started, device):
                break
        _edge(meter.stop, device)
        probe.stop()
        _beat(len(log.step_time_s), "steps done")
        batches.close()
        coords, optimizer_label = trainer.coords, trainer.optimizer_label
        notes = hook_results(trainer.hooks, device)  # sparsity's is a collective: every rank
        del trainer
    timed = log.step_time_s[spec.warmup_steps:]
    return RankResult(
        rank=_rank(), coords=dict(coords), optimizer=optimizer_label, timed_steps=len(timed),
        step_time_s=summarize(timed).median_s if timed else None,
        step_times_s=log.step_time_s, loss=log.loss, lr=log.lr, data_wait_s=log.data_wait_s,
        compute_s=log.compute_s, wait_s=log.wait_s,
        collective_s=collectives["time_s"], collective_source=collectives["source"],
        all_to_all_s=collectives.get("all_to_all_s"), mem_peak_bytes=peak_mem.peak_bytes,
        mem_base_bytes=peak_mem.base_bytes, mem_method=peak_mem.method, energy=meter.result(),
        device_type=device.type, disturbance=probe.result, **notes)
