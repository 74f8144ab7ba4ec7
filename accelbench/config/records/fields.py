"""The field groups record kinds share: the peak an MFU was divided by, memory, energy, the
nodes a cell ran on, the collectives a step sent, and the trials a figure is the median of. A
metrics class is composed of them (TrainMetrics, BlockMetrics), and a reader of a group asks
`carries(kind, Group)` (config/record_kinds.py). Scope words: `_global` (the whole job),
`_per_device` (one device's share), `_per_rank` (a list, one entry a rank, in rank order),
`_per_rank_max` (the largest entry of that list). Memory is in bytes; a memory figure measured
on a device that cannot report it is None, never a stand-in."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


@dataclass(frozen=True)
class PeakFields:
    """The peak an MFU was divided by, and where it came from."""

    peak_flops_per_s_per_device: float | None = None
    peak_label: str | None = None  # "datasheet dense (<key>)", "measured peak (...)" or "none"
    peak_precision: str | None = None
    # the SM clock (MHz) the datasheet peak is quoted at (hardware/specs.py), and the MFU
    # against the peak at the timed window's measured mean clock (peak x clock / peak_clock):
    # a power-capped and a free card compared at the clocks they ran (issue 39)
    peak_clock_mhz: float | None = None
    mfu_at_measured_clock: float | None = None


# a CPU's mem_method without glibc, and every CPU record before 2026-11-27: the process's
# resident memory, freed blocks the C library keeps included (not comparable with the heap in
# use that hardware/device.py's HEAP_METHOD reads)
RSS_METHOD = "sampled RSS"


@dataclass(frozen=True)
class MemoryFields:
    """Estimated and measured memory of one cell, per rank (a single device is rank 0)."""

    mem_estimate_bytes_per_rank: float | None = None  # analytics estimate, one rank
    mem_peak_bytes_per_rank: list[int | None] | None = None  # absolute peak in the window
    mem_base_bytes_per_rank: list[int | None] | None = None  # at the window's start
    mem_added_bytes_per_rank_max: int | None = None  # peak - base, the worst rank: the estimate's
    mem_added_max_rank: int | None = None  # the rank that added the most
    mem_method: str | None = None  # how memory was read, or "unavailable: <why>"
    # whose widths the estimate counted: "runtime" (this runtime's own: fp32 weights, gradients and
    # moments, DDP buckets, FSDP2's unsharded blocks; analytics/runtime_memory.py) or "published"
    mem_estimate_widths: str | None = None
    mem_estimate_moment: str | None = None  # the step's moment the estimate is the peak of


@dataclass(frozen=True)
class EnergyFields:
    """Energy over the timed steps (warm-up excluded), from the device's own counter or the
    host's RAPL; None with energy_note 'unavailable: <reason>' where there is none, never an
    estimate (hardware/energy, docs/energy.md)."""

    energy_source: str | None = None  # nvml, amdsmi, hlml or rapl
    energy_interval_s: float | None = None  # how often the source's counter moves
    energy_window_s: float | None = None  # the metered window, longest rank
    energy_window_too_short: bool | None = None  # under 10 counter updates on some rank
    energy_note: str | None = None  # 'unavailable: <reason>', or what to know about the figures
    energy_j: float | None = None  # every rank's devices (a host-wide counter once per host)
    energy_j_per_rank: list[float] | None = None  # each rank's reading
    energy_devices: list[str] | None = None  # labels of the per-device lists below
    energy_j_per_device: list[float] | None = None
    avg_power_w_per_device: list[float] | None = None  # joules over the window
    peak_power_w_per_device: list[float] | None = None  # highest reported (or sampled) watts
    # the SM clock's mean over the timed window, sampled with power (NVML); None elsewhere
    sm_clock_mhz_mean_per_device: list[float] | None = None
    sm_clock_mhz_mean: float | None = None  # over the devices above
    energy_per_token_j: float | None = None  # energy_j over the window's tokens (all ranks)
    tokens_per_j: float | None = None


@dataclass(frozen=True)
class TopologyFields:
    """The nodes a cell ran on (parallel/topology.py): torchrun's node rank, or Slurm's."""

    n_nodes: int | None = None  # distinct nodes (torchrun agents) of the group
    ranks_per_node: list[int] | None = None  # nodes in node-rank order
    collectives_cross_node: list[str] | None = None  # mesh dims (pp, dp, tp) spanning nodes


@dataclass(frozen=True)
class CommFields:
    """What a step's collectives cost one rank: the time measured in them (profiled), the
    pipeline bubble in theory, and the bytes sent by kind (tp, pp, dp, ep, tied, cp, and in
    all) as this code sends them and as Megatron's volume counts them (parallel/collectives.py,
    parallel/ideal_comm.py). Expert parallelism's all-to-all is MoE's (MoeFields)."""

    collective_time_s_per_rank: list[float | None] | None = None
    collective_time_source: str | None = None
    pipeline_bubble_fraction_theory: float | None = None
    # bytes one rank sends per step, by kind (tp, pp, dp, ep, tied, cp) and in all
    comm_bytes_per_step_per_rank: dict[str, float] | None = None  # this code, busiest rank
    comm_bytes_pp_rank: int | None = None  # the pipeline position of that rank
    comm_bytes_per_step_ideal_per_rank: dict[str, float] | None = None  # Megatron's volume


@dataclass(frozen=True)
class TrialFields:
    """A cell measured as independent trials (bench/trials.py, docs/metrics.md "Trials"): each
    timed figure is the median over trials of each trial's median, `intervals` holds its 95%
    interval by metric name ([low, high], None where too few trials), and each trial's timed
    window was watched for other work (hardware/disturbance.py). Records written before trials
    existed have all of these None: one trial, no interval, not judged."""

    trials: int | None = None  # trials measured (the median over them is the figure)
    interval_confidence: float | None = None  # 0.95
    interval_method: str | None = None  # how the intervals were made, or why there are none
    interval_coverage: float | None = None  # the exact coverage achieved (None without one)
    intervals: dict[str, list[float] | None] | None = None  # metric name -> [low, high]
    trial_seed: int | None = None  # seed of the random order within each round
    trial_positions: list[int] | None = None  # this cell's 0-based place in each round
    trial_cells: int | None = None  # cells interleaved with it (the first round's)
    disturbed: bool | None = None  # some trial's window was disturbed; None: not judged
    disturbed_trials: list[int] | None = None  # 0-based trials flagged
    disturbance_reasons: list[str] | None = None  # 'trial 2: other processes used 35% ...'
    other_cpu_fraction_max: float | None = None  # the largest share others took, any trial

    def interval(self, name: str) -> list[float | None] | None:
        """The 95% interval [low, high] of the figure `name`, or None (too few trials, or a
        record from before trials)."""
        return (self.intervals or {}).get(name)


class ShownFigure(StrEnum):
    """A figure the terminal tables show with its interval (TrialFields.interval's names)."""

    TOKENS_PER_S_GLOBAL = "tokens_per_s_global"
    BLOCK_TOKENS_PER_S = "forward_backward_tokens_per_s_per_device"
    STEP_TIME = "step_time_s_median"  # a training cell's time: what its comparisons divide
    BLOCK_TIME = "forward_backward_time_s_median"  # a block cell's


@dataclass(frozen=True)
class RecordSpec:
    """The spec fields readers use across kinds (tables, the report, the site, fingerprints), as
    a record's spec is read (`record.setup`): each kind's spec class adds its own. Every field
    is optional (None where a record, or an older one, lacks it); keys no class declares stay
    in the record's dict, never dropped."""

    workload: str | None = None  # the workload that wrote it (block, train, ...)
    workload_id: str | None = None  # store/fingerprint.py WORKLOAD_KEY
    fingerprint: str | None = None  # store/fingerprint.py FINGERPRINT_KEY
    study: dict[str, Any] | None = None  # the study and experiment a cell belongs to
    device: str | None = None
    benchmark: str | None = None  # train or genslm (a training cell)
    model_name: str | None = None
    model: dict[str, Any] | None = None  # ModelConfig's fields
    layout: dict[str, Any] | None = None  # Layout's fields
    seq_len: int | None = None
    batch: int | None = None  # a block cell's
    micro_batch: int | None = None
    gas: int | None = None
    dtype: str | None = None
    fp8_recipe: str | None = None
    recompute: str | None = None
    sparsity: float | None = None
    sparsity_pattern: str | None = None
    sparsity_mask: str | None = None
    token_unit: str | None = None  # token, or codon (GenSLM)
    trials: int | None = None
    steps: int | None = None
    repeats: int | None = None
    nproc: int | None = None
    world_size: int | None = None
    compile: bool | None = None
    tf32: bool | None = None
    data: str | None = None
    mem_limit_bytes: int | None = None
    disturbance_threshold: float | None = None
    flops_formula: str | None = None
