"""One metrics builder for every training cell: a single device is the one-rank case.

Rules: counts are per data-parallel replica times dp (tp x pp ranks share the same tokens);
throughput is never averaged over ranks: the global rate is the global tokens over the slowest
rank's median step time, since a synchronous step ends with its last rank; its spread is that
rank's; memory is kept per rank with the worst rank named. Names come from config.schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.flops import hardware_flops_per_token, model_flops_per_token
from accelbench.analytics.metrics import tflops, utilisation
from accelbench.analytics.params import total_params
from accelbench.bench.peak import Peak
from accelbench.bench.timing import summarize
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.layout import Layout
from accelbench.config.schema import TrainMetrics
from accelbench.models.sparsity import no_sparse_kernel_reason
from accelbench.parallel.collectives import (
    bubble_fraction_theory,
    busiest_rank_comm_bytes,
    ideal_comm_bytes_per_step,
)

GRAD_BYTES_PER_PARAM = 4  # gradients stay fp32: autocast keeps fp32 master weights


@dataclass(frozen=True)
class CellCounts:
    """What one optimizer step of a cell does in all, and the peak one device is held to."""

    n_devices: int
    tokens_per_step_global: int
    samples_per_step_global: int
    model_flops_per_step_global: float
    hardware_flops_per_step_global: float
    peak: Peak


@dataclass(frozen=True)
class StepReport:
    """What one step reports as it happens (rank 0's view); the CLI turns it into a line."""

    step: int  # 1-based
    steps: int
    step_time_s: float
    tokens_per_s_global: float
    samples_per_s_global: float
    tflops_per_device: float
    mfu: float | None
    loss: float
    lr: float
    data_wait_s: float
    mem_added_bytes: int | None  # rank 0's peak so far above the window's start


def cell_counts(spec: TrainSpec, cell: TrainCell, layout: Layout, peak: Peak) -> CellCounts:
    """Tokens, samples and FLOPs of one step over every data-parallel replica."""
    samples = cell.micro_batch * cell.gas * layout.dp
    tokens = samples * cell.seq_len
    model = model_flops_per_token(spec.model, cell.seq_len).total * tokens
    hardware = hardware_flops_per_token(spec.model, cell.seq_len, cell.recompute,
                                        early_stop=True) * tokens
    return CellCounts(layout.world_size, tokens, samples, model, hardware, peak)


def step_report(counts: CellCounts, step: int, steps: int, step_time_s: float, loss: float,
                lr: float, data_wait_s: float, mem_added_bytes: int | None) -> StepReport:
    """One step's rates from its time (rank 0's step: the others may differ slightly)."""
    flops_per_device = counts.model_flops_per_step_global / counts.n_devices
    return StepReport(step, steps, step_time_s, counts.tokens_per_step_global / step_time_s,
                      counts.samples_per_step_global / step_time_s,
                      tflops(flops_per_device, step_time_s),
                      utilisation(flops_per_device, step_time_s, counts.peak.flops_per_s),
                      loss, lr, data_wait_s, mem_added_bytes)


def _memory(ranks: list[dict]) -> dict:
    """Per-rank peaks and bases, and the rank that added the most (what the estimate bounds)."""
    peaks = [r.get("mem_peak_bytes") for r in ranks]
    bases = [r.get("mem_base_bytes") for r in ranks]
    added = {r["rank"]: r["mem_peak_bytes"] - r["mem_base_bytes"] for r in ranks
             if r.get("mem_peak_bytes") is not None and r.get("mem_base_bytes") is not None}
    worst = max(added, key=added.__getitem__) if added else None
    return {"mem_peak_bytes_per_rank": peaks, "mem_base_bytes_per_rank": bases,
            "mem_added_bytes_per_rank_max": added.get(worst), "mem_added_max_rank": worst,
            "mem_method": ranks[0].get("mem_method")}


def _step_times(ranks: list[dict], warmup_steps: int) -> dict:
    """Median and spread over the timed steps of the slowest rank (largest median)."""
    slowest = max(ranks, key=lambda r: r["step_time_s"])
    stats = summarize(slowest["step_times_s"][warmup_steps:])
    waits = slowest["data_wait_s"][warmup_steps:]
    return {"timed_steps": stats.count, "few_samples": stats.few_samples,
            "step_time_s_median": stats.median_s, "step_time_s_min": stats.min_s,
            "step_time_s_max": stats.max_s, "step_time_s_iqr": stats.iqr_s,
            "step_time_s_median_per_rank": [r["step_time_s"] for r in ranks],
            "step_time_slowest_rank": slowest["rank"],
            "data_wait_s_median": summarize(waits).median_s,
            "data_wait_fraction": sum(waits) / sum(stats.times_s)}


def _comm(spec: TrainSpec, cell: TrainCell, layout: Layout, backend: str) -> dict:
    """Bytes per step: what this implementation sends (the busiest pipeline position's ranks)
    and, for comparison, Megatron's ideal volume the planner assumes."""
    pp_rank, sent = busiest_rank_comm_bytes(spec.model, layout, cell.seq_len, cell.micro_batch,
                                            cell.gas, cell.dtype, cell.recompute, backend)
    grad_bytes = GRAD_BYTES_PER_PARAM * total_params(spec.model) / (layout.tp * layout.pp)
    ideal = ideal_comm_bytes_per_step(spec.model, layout, cell.seq_len, cell.micro_batch,
                                      cell.gas, cell.dtype, grad_bytes, cell.recompute)
    return {"comm_bytes_per_step_per_rank": sent, "comm_bytes_pp_rank": pp_rank,
            "comm_bytes_per_step_ideal_per_rank": ideal,
            "pipeline_bubble_fraction_theory": bubble_fraction_theory(layout.pp, cell.gas,
                                                                      layout.vp)}


def cell_metrics(spec: TrainSpec, cell: TrainCell, layout: Layout, counts: CellCounts,
                 ranks: list[dict], estimate_bytes: float, backend: str) -> TrainMetrics:
    """One record's metrics from every rank's results (one rank on one device)."""
    times = _step_times(ranks, spec.warmup_steps)
    t, n = times["step_time_s_median"], counts.n_devices
    flops_per_device = counts.model_flops_per_step_global / n
    hw_per_device = counts.hardware_flops_per_step_global / n
    peak = counts.peak
    return TrainMetrics(
        **times, **_memory(ranks), **_comm(spec, cell, layout, backend), n_devices=n,
        tokens_per_step_global=counts.tokens_per_step_global,
        samples_per_step_global=counts.samples_per_step_global,
        tokens_per_s_global=counts.tokens_per_step_global / t,
        tokens_per_s_per_device=counts.tokens_per_step_global / t / n,
        samples_per_s_global=counts.samples_per_step_global / t,
        samples_per_s_per_device=counts.samples_per_step_global / t / n,
        model_flops_per_step_global=counts.model_flops_per_step_global,
        hardware_flops_per_step_global=counts.hardware_flops_per_step_global,
        tflops_per_device=tflops(flops_per_device, t),
        mfu=utilisation(flops_per_device, t, peak.flops_per_s),
        hfu=utilisation(hw_per_device, t, peak.flops_per_s),
        peak_flops_per_s_per_device=peak.flops_per_s, peak_label=peak.label,
        peak_precision=peak.precision, loss_first=ranks[0]["loss"][0],
        loss_last=ranks[0]["loss"][-1], optimizer=ranks[0]["optimizer"],
        collective_time_s_per_rank=[r["collective_s"] for r in ranks],
        collective_time_source=ranks[0]["collective_source"],
        mem_estimate_bytes_per_rank=estimate_bytes,
        **_sparsity(spec, cell, counts, ranks))


def _sparsity(spec: TrainSpec, cell: TrainCell, counts: CellCounts, ranks: list[dict]) -> dict:
    """Sparsity fields: the measured level, what ran and what it executed. Masked dense runs
    every multiply of the dense matmuls, so executed FLOPs are the hardware FLOPs."""
    if not cell.sparsity:
        return {}
    kernel, reason = None, no_sparse_kernel_reason(spec.sparsity_pattern,
                                                  ranks[0].get("device_type", spec.device))
    return {"sparsity_measured": ranks[0].get("sparsity_measured"), "sparse_kernel": kernel,
            "sparse_kernel_reason": reason,
            "executed_flops_per_step_global": counts.hardware_flops_per_step_global}
