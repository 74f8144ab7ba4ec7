"""One metrics builder for every training cell: a single device is the one-rank case.

Rules: counts are per data-parallel replica times dp (tp x pp ranks share the same tokens);
throughput is never averaged over ranks: the global rate is the global tokens over the slowest
rank's median step time, since a synchronous step ends with its last rank; its spread is that
rank's; memory is kept per rank with the worst rank named. Names come from config/records/train.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from accelbench.analytics.cell_energy import UNAVAILABLE, cell_energy
from accelbench.analytics.flops import (
    dropped_flops,
    hardware_flops_per_token,
    model_flops_per_token,
    two_four_skipped_flops_per_token,
)
from accelbench.analytics.moe_cost import expert_params
from accelbench.analytics.params import total_params
from accelbench.analytics.slow_rank import find_straggler
from accelbench.analytics.throughput import at_measured_clock, tflops, utilisation
from accelbench.bench.gemm_peak import Peak
from accelbench.bench.timing import TimingStats, summarize
from accelbench.bench.train.rank_result import RankResult
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.layout import Layout
from accelbench.config.model import moe_layer_count
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.train import TrainMetrics
from accelbench.config.runtime_settings import reduce_bytes
from accelbench.parallel.bubble import bubble_fraction_theory
from accelbench.parallel.collectives import busiest_rank_comm_bytes
from accelbench.parallel.context import placement
from accelbench.parallel.ideal_comm import ideal_comm_bytes_per_step
from accelbench.parallel.topology import cross_node_dims, topology_of


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


def _memory(ranks: list[RankResult]) -> dict:
    """Per-rank peaks and bases, and the rank that added the most (what the estimate bounds)."""
    peaks = [r.mem_peak_bytes for r in ranks]
    bases = [r.mem_base_bytes for r in ranks]
    added = {r.rank: r.mem_peak_bytes - r.mem_base_bytes for r in ranks
             if r.mem_peak_bytes is not None and r.mem_base_bytes is not None}
    worst = max(added, key=added.__getitem__) if added else None
    return dict(mem_peak_bytes_per_rank=peaks, mem_base_bytes_per_rank=bases,
                mem_added_bytes_per_rank_max=added.get(worst), mem_added_max_rank=worst,
                mem_method=ranks[0].mem_method)


def _step_times(ranks: list[RankResult], warmup_steps: int) -> tuple[dict, TimingStats]:
    """Median and spread over the timed steps of the slowest rank (largest median): the
    record's fields, and the slowest rank's statistics they come from."""
    slowest = max(ranks, key=lambda r: r.step_time_s)
    stats = summarize(slowest.step_times_s[warmup_steps:])
    waits = slowest.data_wait_s[warmup_steps:]
    return dict(timed_steps=stats.count, few_samples=stats.few_samples,
                step_time_s_median=stats.median_s, step_time_s_min=stats.min_s,
                step_time_s_max=stats.max_s, step_time_s_iqr=stats.iqr_s,
                step_time_s_median_per_rank=[r.step_time_s for r in ranks],
                step_time_slowest_rank=slowest.rank,
                data_wait_s_median=summarize(waits).median_s,
                data_wait_fraction=sum(waits) / sum(stats.times_s)), stats


def _comm(spec: TrainSpec, cell: TrainCell, layout: Layout, backend: str) -> dict:
    """Bytes per step: what this implementation sends (the busiest pipeline position's ranks;
    under ep its all-to-all rows are the uniform-routing expectation) and, for comparison,
    Megatron's ideal volume the planner assumes (under ep the routed experts, 1 / (ep x pp) of
    them a rank, reduced over dp / ep); activations and messages in the compute dtype."""
    compute = spec.precision(cell).compute  # fp8: bf16
    settings = spec.runtime_settings  # FSDP2's bf16 policy gathers 2 bytes, reduces as set
    pp_rank, sent = busiest_rank_comm_bytes(spec.model, layout, cell.seq_len, cell.micro_batch,
                                            cell.gas, compute,
                                            cell.recompute, backend, settings)
    cfg = spec.model
    experts = (moe_layer_count(cfg) * cfg.n_experts * expert_params(cfg)
               if cfg.n_experts and layout.ep > 1 else 0)
    width = reduce_bytes(settings, placement(layout), cell.dtype)  # as this runtime reduces
    grad_bytes = width * (total_params(cfg) - experts) / (layout.tp * layout.pp)
    ideal = ideal_comm_bytes_per_step(cfg, layout, cell.seq_len, cell.micro_batch, cell.gas,
                                      compute, grad_bytes, cell.recompute,
                                      width * experts / (layout.ep * layout.pp))
    return dict(comm_bytes_per_step_per_rank=sent, comm_bytes_pp_rank=pp_rank,
                comm_bytes_per_step_ideal_per_rank=ideal,
                pipeline_bubble_fraction_theory=bubble_fraction_theory(layout.pp, cell.gas,
                                                                          layout.vp))


FP8_EMULATED_NOTE = ("emulated: no float8 unit ran the GEMMs, so no FP8 peak applies (a CPU "
                     "has none; its measured peak is a bf16 GEMM's)")


def _fp8(counts: CellCounts, ranks: list[RankResult], t: float) -> dict:
    """An fp8 cell's fields: how its float8 layers ran, and its model FLOPs over the dense FP8
    peak beside its MFU (over the dense BF16 peak); empty when emulated or without a peak."""
    done = ranks[0].float8
    if not done:
        return {}
    fp8 = TrainMetrics(**done)  # the conversion's fields, under the record's names
    fp8_peak = fp8.fp8_peak_flops_per_s_per_device
    if fp8.fp8_mode == "emulated":
        used, note = None, FP8_EMULATED_NOTE
    elif fp8_peak is None:
        used, note = None, "the device table has no FP8 peak for this device"
    else:
        flops_per_device = counts.model_flops_per_step_global / counts.n_devices
        used, note = utilisation(flops_per_device, t, fp8_peak), None
    return dict(done, fp8_peak_utilisation=used, fp8_peak_note=note)


def cell_metrics(spec: TrainSpec, cell: TrainCell, layout: Layout, counts: CellCounts,
                 ranks: list[RankResult], estimate_bytes: float, backend: str) -> TrainMetrics:
    """One record's metrics from every rank's results (one rank on one device)."""
    times, stats = _step_times(ranks, spec.warmup_steps)
    t, n = stats.median_s, counts.n_devices
    flops_per_device = counts.model_flops_per_step_global / n
    hardware = counts.hardware_flops_per_step_global - _dropped_flops_per_step(
        spec, cell, ranks, stats.count)
    hw_per_device = hardware / n
    peak = counts.peak
    return TrainMetrics(
        **times, **_memory(ranks), n_devices=n,
        **_comm(spec, cell, layout, backend),
        tokens_per_step_global=counts.tokens_per_step_global,
        samples_per_step_global=counts.samples_per_step_global,
        tokens_per_s_global=counts.tokens_per_step_global / t,
        tokens_per_s_per_device=counts.tokens_per_step_global / t / n,
        samples_per_s_global=counts.samples_per_step_global / t,
        samples_per_s_per_device=counts.samples_per_step_global / t / n,
        model_flops_per_step_global=counts.model_flops_per_step_global,
        hardware_flops_per_step_global=hardware,
        tflops_per_device=tflops(flops_per_device, t),
        mfu=utilisation(flops_per_device, t, peak.flops_per_s),
        hfu=utilisation(hw_per_device, t, peak.flops_per_s), **_fp8(counts, ranks, t),
        **_at_clock(utilisation(flops_per_device, t, peak.flops_per_s), peak, ranks),
        peak_flops_per_s_per_device=peak.flops_per_s, peak_label=peak.label,
        peak_precision=peak.precision, loss_first=ranks[0].loss[0],
        loss_last=ranks[0].loss[-1], optimizer=ranks[0].optimizer,
        collective_time_s_per_rank=[r.collective_s for r in ranks],
        collective_time_source=ranks[0].collective_source,
        mem_estimate_bytes_per_rank=estimate_bytes,
        **_energy(counts, ranks, stats.count),
        **_sparsity(spec, cell, counts, ranks, t), **_moe(ranks, spec.warmup_steps),
        **straggler_fields(ranks, spec.warmup_steps),
        **topology_fields(layout, ranks))


def straggler_fields(ranks: list[RankResult], warmup_steps: int) -> dict:
    """Each rank's median compute over the timed steps and its median wait (the time its step
    loop was blocked, as the kernel counts it; where it does not, the step less its compute),
    and the rank whose compute stands out of its peers' noise (analytics/
    straggler.py), with the evidence; nothing where compute is not measured (an accelerator)
    or a single rank ran. Peers are the ranks of one pipeline position (their data, tensor
    and context parallel ranks do the same work; stages do not: a FLOP count of each stage's
    work missed the head's stage by 20-30% on this CPU, as much as a slow rank adds), so a
    pipeline position of one rank is not compared."""
    compute = {r.rank: r.compute_s[warmup_steps:] for r in ranks}
    if len(ranks) < 2 or not all(compute.values()):
        return {}
    waits = [median(r.wait_s[warmup_steps:] or
                    [t - c for t, c in zip(r.step_times_s[warmup_steps:], compute[r.rank],
                                           strict=False)]) for r in ranks]
    positions: dict[int, dict[int, list[float]]] = {}
    for r in ranks:
        positions.setdefault(r.coords.get("pp", 0), {})[r.rank] = compute[r.rank]
    found = [find_straggler(peers) for peers in positions.values() if len(peers) > 1]
    named = [f for f in found if f.rank is not None]
    worst = max(named or found, key=lambda f: f.excess or 0.0, default=None)
    return dict(compute_time_s_median_per_rank=[median(compute[r.rank]) for r in ranks],
                wait_time_s_median_per_rank=waits,
                slow_rank=worst.rank if worst is not None else None,
                slow_rank_evidence=(worst.evidence() if worst is not None else
                                    "not compared: no two ranks share a pipeline position"))


def topology_fields(layout: Layout, ranks: list[RankResult]) -> dict:
    """Nodes, ranks per node and the mesh dims crossing nodes, from every rank's place."""
    if any(r.place is None for r in ranks):
        return {}
    topology = topology_of([r.place for r in ranks])
    return dict(n_nodes=topology.n_nodes, ranks_per_node=topology.ranks_per_node(),
                collectives_cross_node=cross_node_dims(layout, topology))


def summed_expert_load(ranks: list[RankResult], key: str) -> list[list[int]]:
    """Per layer and expert, every replica's tokens: summed over the data-parallel ranks of
    each pipeline stage (tensor-parallel ranks see the same tokens: tp 0 alone counts), the
    stages' layers in order."""
    out: list[list[int]] = []
    for pp in sorted({r.coords.get("pp", 0) for r in ranks}):
        loads = [r.moe_load[key] for r in ranks
                 if r.coords.get("pp", 0) == pp and r.coords.get("tp", 0) == 0]
        out += [[sum(col) for col in zip(*layer, strict=True)]
                for layer in zip(*loads, strict=True)]
    return out


def _all_to_all(ranks: list[RankResult], warmup_steps: int) -> dict:
    """Time in all-to-all of the profiled step (the last warm-up step) on each rank, and the
    busiest rank's share of that step's time."""
    times = [r.all_to_all_s for r in ranks]
    shares = [a / r.step_times_s[warmup_steps - 1] for a, r in zip(times, ranks, strict=True)
              if a is not None and 0 < warmup_steps <= len(r.step_times_s)]
    return dict(all_to_all_time_s_per_rank=times,
                all_to_all_fraction=max(shares) if shares else None)


def _moe(ranks: list[RankResult], warmup_steps: int) -> dict:
    """A mixture-of-experts cell's load per expert (routed, dropped), drop fraction, load
    imbalance and all-to-all time; nothing for a dense model."""
    if not all(r.moe_load for r in ranks):
        return {}
    routed, dropped = summed_expert_load(ranks, "routed"), summed_expert_load(ranks, "dropped")
    total = sum(map(sum, routed))
    imbalance = [max(layer) * len(layer) / sum(layer) for layer in routed if sum(layer)]
    return dict(moe_tokens_routed_per_expert=routed, moe_tokens_dropped_per_expert=dropped,
                moe_drop_fraction=sum(map(sum, dropped)) / total if total else None,
                moe_load_imbalance=max(imbalance) if imbalance else None,
                **_all_to_all(ranks, warmup_steps))


def _dropped_flops_per_step(spec: TrainSpec, cell: TrainCell, ranks: list[RankResult],
                            timed_steps: int) -> float:
    """The expert work capacity drops skipped per timed step (forward, backward, and the
    forward again under full recompute): hardware FLOPs are net of it, model FLOPs (MFU) not."""
    if not timed_steps or not all(r.moe_load for r in ranks):
        return 0.0
    dropped = sum(map(sum, summed_expert_load(ranks, "dropped"))) / timed_steps
    skipped = dropped_flops(spec.model, dropped)
    return skipped.total + (skipped.forward if cell.recompute == "full" else 0.0)


def _at_clock(mfu: float | None, peak: Peak, ranks: list[RankResult]) -> dict:
    """The datasheet peak's own clock and the MFU against the peak at the timed window's
    mean SM clock (over every rank's devices), where the energy meter read clocks (NVML)."""
    clocks = [c for r in ranks for c in ((r.energy or {}).get("mean_sm_clock_mhz_per_device")
                                         or ())]
    clock = sum(clocks) / len(clocks) if len(clocks) == len(ranks) and clocks else None
    return dict(peak_clock_mhz=peak.clock_mhz,
                mfu_at_measured_clock=at_measured_clock(mfu, peak.clock_mhz, clock))


def _energy(counts: CellCounts, ranks: list[RankResult], timed_steps: int) -> dict:
    """Energy over the timed steps of every rank, per token of those steps (all replicas)."""
    results = [r.energy or {UNAVAILABLE: "not metered"} for r in ranks]
    return metrics_dict(cell_energy(results, counts.tokens_per_step_global * timed_steps))


def _sparsity(spec: TrainSpec, cell: TrainCell, counts: CellCounts, ranks: list[RankResult],
              t: float) -> dict:
    """Sparsity fields: the measured level, what ran and what it executed. Masked dense runs
    every multiply of the dense matmuls (executed = hardware FLOPs); a 2:4 kernel skips half of
    the masked matrices' forward and input-gradient multiplies. The sparse peak's utilisation
    divides the dense-equivalent hardware FLOPs by the vendor's 2:4 peak (which counts them so),
    and only when the kernel ran: it is never called MFU."""
    if not cell.sparsity:
        return {}
    kernel = ranks[0].sparse_kernel
    executed = counts.hardware_flops_per_step_global
    sparse_peak = utilised = None
    if kernel is not None:
        tokens = counts.tokens_per_step_global
        executed -= tokens * two_four_skipped_flops_per_token(spec.model, cell.seq_len,
                                                              cell.recompute, early_stop=True)
        sparse_peak = counts.peak.sparse_flops_per_s
        utilised = utilisation(counts.hardware_flops_per_step_global / counts.n_devices, t,
                               sparse_peak)
    return dict(sparsity_measured=ranks[0].sparsity_measured, sparse_kernel=kernel,
                sparse_kernel_reason=ranks[0].sparse_kernel_reason,
                executed_flops_per_step_global=executed,
                sparse_peak_flops_per_s_per_device=sparse_peak,
                sparse_peak_utilisation=utilised)
