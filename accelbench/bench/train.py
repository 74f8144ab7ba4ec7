"""The GPT pretraining benchmark: real optimisation steps, timed, over a sweep of cells.

Each step: GAS micro-batches of forward and backward (autocast for fp16/bf16, loss scaling for
fp16), gradient clipping, AdamW, learning-rate schedule. The first warmup_steps are run but not
timed into the summary; the rest give the median step time and its spread.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import torch

from accelbench.analytics.cluster import Layout
from accelbench.analytics.flops import (
    FORMULA,
    hardware_flops_per_token,
    model_flops_per_token,
)
from accelbench.analytics.memory import memory_per_device
from accelbench.analytics.metrics import tflops, utilisation
from accelbench.bench.bisection import largest_that_fits
from accelbench.bench.dtypes import TORCH_DTYPES, dtype_support, set_tf32
from accelbench.bench.guard import (
    guarded,
    is_oom,
    memory_budget_bytes,
    refuse_if_too_big,
    release_device_memory,
)
from accelbench.bench.memory import PeakMemory
from accelbench.bench.metrics import peak_warning
from accelbench.bench.optim import lr_at, make_adamw
from accelbench.bench.outcome import Outcome, Progress, Sink
from accelbench.bench.peak import resolve_peak
from accelbench.bench.timing import PhaseTimer, summarize
from accelbench.bench.train_data import BatchSource, check_data, open_batches
from accelbench.bench.train_spec import TrainCell, TrainSpec, validate_train_spec
from accelbench.hardware.detect import detect_spec, resolve_device
from accelbench.models.convert_hf_gpt2 import load_checkpoint_dir, load_hf_gpt2_state_dict
from accelbench.models.gpt import GPT

KIND = "train"


class Diverged(Exception):
    """The loss became NaN or infinite at `step` (1-based, as the per-step lines count)."""

    def __init__(self, step: int, loss: float, log: StepLog) -> None:
        super().__init__(f"loss {loss} at step {step}")
        self.step, self.log = step, log


@dataclass
class StepLog:
    """Per-step raw measurements of one cell."""

    step_time_s: list[float] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    data_wait_s: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)


def estimate_bytes(spec: TrainSpec, cell: TrainCell) -> float:
    """The planner's per-device memory estimate for this single-device cell."""
    layout = Layout(dp=1, mb=cell.micro_batch, recompute=cell.recompute)
    return memory_per_device(spec.model, cell.seq_len, layout, cell.gas, cell.dtype,
                             fused_attention=True).total


def build(spec: TrainSpec, cell: TrainCell, device: torch.device):
    """Model (fp32 master weights), optimizer, grad scaler and the module to call."""
    torch.manual_seed(spec.seed)
    model = GPT(spec.model)
    if spec.init_checkpoint:
        load_hf_gpt2_state_dict(model, load_checkpoint_dir(spec.init_checkpoint))
    model = model.to(device)
    model.set_recompute(cell.recompute)
    optimizer, flavour = make_adamw(model, spec.lr, spec.weight_decay, device)
    scaler = torch.amp.GradScaler(device.type, enabled=cell.dtype == "fp16")
    module = torch.compile(model) if spec.compile else model
    return model, module, optimizer, scaler, flavour


def train_step(module, optimizer, scaler, batches: BatchSource, cell: TrainCell,
               device: torch.device, grad_clip: float, log: StepLog) -> torch.Tensor:
    """One optimizer step of GAS micro-batches; returns the mean loss (on device)."""
    autocast = (torch.autocast(device.type, dtype=TORCH_DTYPES[cell.dtype])
                if cell.dtype != "fp32" else nullcontext())
    total = torch.zeros((), device=device)
    wait_s = 0.0
    for _ in range(cell.gas):
        t0 = time.perf_counter()
        x, y = batches.next()
        wait_s += time.perf_counter() - t0
        with autocast:
            _, loss = module(x, y)
        loss = loss / cell.gas
        scaler.scale(loss).backward()
        total += loss.detach()
    scaler.unscale_(optimizer)
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(module.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    log.data_wait_s.append(wait_s)
    return total


def run_steps(spec: TrainSpec, cell: TrainCell, device: torch.device,
              progress: Progress | None) -> tuple[StepLog, PeakMemory, str]:
    """Build, then run up to spec.steps steps (or until the time budget); raise Diverged."""
    log = StepLog()
    # The peak first: its GEMM operands (1 GiB at n=8192) must stay out of the memory window.
    resolve_peak(detect_spec(device), device, cell.dtype, spec.tf32)
    with PeakMemory(device) as peak_mem:
        model, module, optimizer, scaler, flavour = build(spec, cell, device)
        batches = open_batches(spec, cell, device)
        started = time.perf_counter()
        for step in range(spec.steps):
            lr = lr_at(step, spec.lr, spec.lr_warmup_steps, spec.steps, spec.min_lr_ratio)
            for group in optimizer.param_groups:
                group["lr"] = lr
            timer = PhaseTimer(device)
            with timer.phase("step"):
                loss = train_step(module, optimizer, scaler, batches, cell, device,
                                  spec.grad_clip, log)
            loss_value = float(loss.item())
            log.step_time_s.append(timer.times_s()["step"][0])
            log.loss.append(loss_value)
            log.lr.append(lr)
            if progress:
                progress(step + 1, spec.steps, _step_line(spec, cell, log, device, peak_mem))
            if not math.isfinite(loss_value):
                raise Diverged(step + 1, loss_value, log)
            if spec.time_budget_s and time.perf_counter() - started > spec.time_budget_s:
                break
        batches.close()
        del model, module, optimizer
    return log, peak_mem, flavour


def _step_line(spec: TrainSpec, cell: TrainCell, log: StepLog, device: torch.device,
               peak_mem: PeakMemory) -> str:
    """What one step reports as it happens: time, tokens/s, samples/s, TFLOPS, MFU, memory so
    far, loss, learning rate, data wait (single device: global = per device)."""
    t = log.step_time_s[-1]
    tokens = cell.micro_batch * cell.gas * cell.seq_len
    flops = model_flops_per_token(spec.model, cell.seq_len).total * tokens
    peak = resolve_peak(detect_spec(device), device, cell.dtype, spec.tf32)
    mfu = utilisation(flops, t, peak.flops_per_s)
    mfu_text = "    -" if mfu is None else f"{100 * mfu:5.1f}%"
    return (f"{t * 1e3:9.1f} ms  {tokens / t:12,.0f} tok/s  "
            f"{cell.micro_batch * cell.gas / t:8.2f} samples/s  {tflops(flops, t):7.2f} TFLOPS  "
            f"MFU {mfu_text}  mem {peak_mem.current_peak_bytes() / 2**30:6.2f} GiB  "
            f"loss {log.loss[-1]:.4f}  lr {log.lr[-1]:.2e}  "
            f"data wait {log.data_wait_s[-1] * 1e3:.1f} ms")


def cell_metrics(spec: TrainSpec, cell: TrainCell, log: StepLog, device: torch.device) -> dict:
    """Throughput, TFLOPS, MFU, HFU and data wait from the timed (post-warm-up) steps."""
    timed = log.step_time_s[spec.warmup_steps:]
    stats = summarize(timed)
    tokens = cell.micro_batch * cell.gas * cell.seq_len
    t = stats.median_s
    model_flops = model_flops_per_token(spec.model, cell.seq_len).total * tokens
    hw_flops = hardware_flops_per_token(spec.model, cell.seq_len, cell.recompute,
                                        early_stop=True) * tokens
    peak = resolve_peak(detect_spec(device), device, cell.dtype, spec.tf32)
    waits = log.data_wait_s[spec.warmup_steps:]
    return {
        "n_devices": 1, "tokens_per_step": tokens, "timed_steps": stats.count,
        "few_samples": stats.few_samples, "step_time_s_median": t, "step_time_s_min": stats.min_s,
        "step_time_s_max": stats.max_s, "step_time_s_iqr": stats.iqr_s,
        "tokens_per_s_global": tokens / t, "tokens_per_s_per_device": tokens / t,
        "samples_per_s_global": cell.micro_batch * cell.gas / t,
        "samples_per_s_per_device": cell.micro_batch * cell.gas / t,
        "model_flops_per_step": model_flops, "hardware_flops_per_step": hw_flops,
        "tflops_per_device": tflops(model_flops, t),
        "mfu": utilisation(model_flops, t, peak.flops_per_s),
        "hfu": utilisation(hw_flops, t, peak.flops_per_s),
        "peak_flops_per_s": peak.flops_per_s, "peak_label": peak.label,
        "peak_precision": peak.precision,
        "data_wait_s_median": summarize(waits).median_s,
        "data_wait_fraction": sum(waits) / sum(timed),
        "loss_first": log.loss[0], "loss_last": log.loss[-1],
    }


def cell_spec(spec: TrainSpec, cell: TrainCell, device: torch.device) -> dict:
    """The full spec of one cell, as recorded."""
    shared = spec.to_dict()
    for swept in ("seq_lens", "micro_batches", "gas", "dtypes", "recomputes"):
        shared.pop(swept)
    return {**shared, "workload": KIND, "model_name": spec.model.name,
            "seq_len": cell.seq_len, "micro_batch": cell.micro_batch, "gas": cell.gas,
            "dtype": cell.dtype, "recompute": cell.recompute, "device": str(device),
            "layout": {"dp": 1, "tp": 1, "pp": 1, "zero": 0}, "flops_formula": FORMULA}


def run_train_cell(spec: TrainSpec, cell: TrainCell, device: torch.device,
                   progress: Progress | None = None) -> Outcome:
    """Measure one cell, or record why it could not run (unsupported, does not fit, diverged)."""
    record_spec = cell_spec(spec, cell, device)
    unsupported = dtype_support(device, cell.dtype)
    if unsupported:
        return Outcome(KIND, "unsupported", record_spec, reason=unsupported)
    estimate = estimate_bytes(spec, cell)
    refusal = refuse_if_too_big(estimate, memory_budget_bytes(device, spec.mem_limit_bytes))
    if refusal:
        return Outcome(KIND, "oom", record_spec, {"mem_estimate_bytes": estimate}, reason=refusal)

    def body() -> Outcome:
        set_tf32(device, spec.tf32)
        try:
            log, peak_mem, flavour = run_steps(spec, cell, device, progress)
        except Diverged as err:
            return Outcome(KIND, "diverged", record_spec,
                           {"diverged_step": err.step, "mem_estimate_bytes": estimate},
                           raw=vars(err.log), reason=str(err))
        if len(log.step_time_s) <= spec.warmup_steps:
            return Outcome(KIND, "timeout", record_spec, raw=vars(log),
                           reason=f"time budget ended after {len(log.step_time_s)} steps, "
                                  f"none timed past the {spec.warmup_steps} warm-up steps")
        metrics = cell_metrics(spec, cell, log, device)
        metrics.update(mem_estimate_bytes=estimate, mem_peak_bytes=peak_mem.peak_bytes,
                       mem_base_bytes=peak_mem.base_bytes, mem_method=peak_mem.method,
                       optimizer=f"AdamW ({flavour})")
        return Outcome(KIND, "ok", record_spec, metrics, vars(log), reason=peak_warning(metrics))

    return guarded(KIND, record_spec, device, body)


def run_train_sweep(spec: TrainSpec, sink: Sink, progress: Progress | None = None,
                    on_cell: Progress | None = None) -> list[Outcome]:
    """Every cell in turn; each outcome goes to `sink` as soon as it exists."""
    validate_train_spec(spec)
    check_data(spec)
    from accelbench.bench import train_launch  # it builds on this module

    in_group = train_launch.in_process_group()
    if in_group or spec.nproc > 1 or spec.layout:  # a layout that cannot run stops here (exit 2)
        world = train_launch.read_env().world_size if in_group else spec.nproc
        for gas in spec.gas:
            train_launch.group_layout(spec, world, gas)
    if in_group:
        return train_launch.run_group_sweep(spec, sink, progress, on_cell)
    if spec.nproc > 1:
        return train_launch.run_launched_sweep(spec, sink, on_cell)
    device = resolve_device(spec.device)
    cells = spec.cells()
    if spec.max_micro_batch:  # one cell per (seq, gas, dtype, recompute) at its largest mb
        unique = {replace(c, micro_batch=1) for c in cells}
        cells = sorted(unique, key=lambda c: (c.dtype, c.recompute, c.seq_len, c.gas))
    outcomes = []
    for i, cell in enumerate(cells):
        if on_cell:
            on_cell(i, len(cells), cell.label)
        search = None
        if spec.max_micro_batch:
            mb, search = find_max_micro_batch(spec, cell, device)
            cell = replace(cell, micro_batch=max(mb, 1))
        outcome = run_train_cell(spec, cell, device, progress)
        if search is not None:
            outcome = replace(outcome, spec={**outcome.spec, "micro_batch_search": search})
        sink(outcome)
        outcomes.append(outcome)
    return outcomes


MAX_MICRO_BATCH = 4096


def _fits_by_trial(spec: TrainSpec, cell: TrainCell, device: torch.device) -> bool:
    """Run two real steps at this micro-batch; False if the device runs out of memory."""
    trial = replace(spec, steps=2, warmup_steps=0, time_budget_s=None)
    try:
        run_steps(trial, replace(cell, gas=1), device, None)
        return True
    except Exception as err:  # noqa: BLE001 - only OOM means "too big"; re-raise the rest
        if is_oom(err):
            return False
        raise
    finally:
        release_device_memory(device)


def fit_check(spec: TrainSpec, device: torch.device) -> tuple[Callable[[TrainCell], bool], str]:
    """Whether a cell fits, and how that is decided: by trial on an accelerator (two real steps;
    an OOM means no), by the memory estimate against the budget on a CPU or under --mem-limit."""
    budget = memory_budget_bytes(device, spec.mem_limit_bytes)
    by_trial = device.type != "cpu" and spec.mem_limit_bytes is None

    def fits(cell: TrainCell) -> bool:
        if by_trial:
            return _fits_by_trial(spec, cell, device)
        return refuse_if_too_big(estimate_bytes(spec, cell), budget) is None

    return fits, "trial" if by_trial else "estimate"


def find_max_micro_batch(spec: TrainSpec, cell: TrainCell,
                         device: torch.device) -> tuple[int, dict]:
    """Largest micro-batch that fits: by trying on an accelerator, by the estimate on a CPU.

    Doubling from 1, then bisection between the last fit and the first miss. Returns 0 when
    even a micro-batch of 1 does not fit.
    """
    fits, method = fit_check(spec, device)
    search = largest_that_fits(lambda mb: fits(replace(cell, micro_batch=mb)),
                               start=1, limit=MAX_MICRO_BATCH)
    return search.largest, {"method": method, "largest": search.largest,
                            "tried": search.tried()}
