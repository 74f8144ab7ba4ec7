"""The declared record schema: which spec fields a training sweep sweeps, and every metric a
record of each workload carries, with unit and scope in its name.

Records are written from these dataclasses (`metrics_dict`), so a metric name exists once, here;
tables, exports, the report and the planner's comparison read the same names. Scope words:
`_global` (the whole job), `_per_device` (one device's share), `_per_rank` (a list, one entry a
rank, in rank order), `_per_rank_max` (the largest entry of that list). Memory is in bytes; a
memory figure measured on a device that cannot report it is None, never a stand-in.

Version 2 renamed the version-1 keys (results.migrate upgrades version-1 records on read).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

SCHEMA_VERSION = 2

# A training spec's swept list fields and the cell field each becomes, outermost first
# (the sweep order: dtype, then recompute, sequence, GAS, micro-batch, sparsity).
TRAIN_SWEPT: dict[str, str] = {"dtypes": "dtype", "recomputes": "recompute",
                               "seq_lens": "seq_len", "gas": "gas",
                               "micro_batches": "micro_batch", "sparsities": "sparsity"}

BLOCK_PHASES = ("forward", "backward", "forward_backward")


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


@dataclass(frozen=True)
class TrainMetrics(EnergyFields, MemoryFields, PeakFields, TopologyFields, TrialFields):
    """A training cell (train, genslm, scale): one device is the one-rank case of N ranks."""

    n_devices: int | None = None
    tokens_per_step_global: int | None = None
    samples_per_step_global: int | None = None
    timed_steps: int | None = None
    few_samples: bool | None = None
    step_time_s_median: float | None = None  # the slowest rank's median: the job's pace
    step_time_s_min: float | None = None
    step_time_s_max: float | None = None
    step_time_s_iqr: float | None = None
    step_time_s_median_per_rank: list[float] | None = None
    step_time_slowest_rank: int | None = None
    # each rank's own compute a step (CPU seconds of its forward and backward, a CPU device) and
    # its wait (the step less that), medians over the timed steps; the rank whose compute
    # stands out of its peers' noise, and the evidence (analytics/straggler.py)
    compute_time_s_median_per_rank: list[float] | None = None
    wait_time_s_median_per_rank: list[float] | None = None
    slow_rank: int | None = None
    slow_rank_evidence: str | None = None
    tokens_per_s_global: float | None = None
    tokens_per_s_per_device: float | None = None
    samples_per_s_global: float | None = None
    samples_per_s_per_device: float | None = None
    model_flops_per_step_global: float | None = None
    hardware_flops_per_step_global: float | None = None
    tflops_per_device: float | None = None
    mfu: float | None = None
    hfu: float | None = None
    data_wait_s_median: float | None = None
    data_wait_fraction: float | None = None
    loss_first: float | None = None
    loss_last: float | None = None
    optimizer: str | None = None
    collective_time_s_per_rank: list[float | None] | None = None
    collective_time_source: str | None = None
    pipeline_bubble_fraction_theory: float | None = None
    # bytes one rank sends per step, by kind (tp, pp, dp, ep, tied, cp) and in all
    comm_bytes_per_step_per_rank: dict[str, float] | None = None  # this code, busiest rank
    comm_bytes_pp_rank: int | None = None  # the pipeline position of that rank
    comm_bytes_per_step_ideal_per_rank: dict[str, float] | None = None  # Megatron's volume
    diverged_step: int | None = None  # 1-based step whose loss was not finite
    # weight sparsity (models/sparsity.py, docs/sparsity.md); MFU stays dense-equivalent
    sparsity_measured: float | None = None  # zeros in the sparse matrices after the last step
    executed_flops_per_step_global: float | None = None  # what the kernels performed
    # the vendor's 2:4 sparse peak, and the cell's hardware (dense-equivalent) FLOPs against
    # it: only when a 2:4 kernel ran; never MFU, which stays dense FLOPs over the dense peak
    sparse_peak_flops_per_s_per_device: float | None = None
    sparse_peak_utilisation: float | None = None
    sparse_kernel: str | None = None  # the sparse kernel that ran, None when none did
    sparse_kernel_reason: str | None = None  # why none ran (a sparse cell only)
    speedup_vs_dense: float | None = None  # dense cell's step time / this one's, same sweep
    # its 95% interval from both cells' trials, and what it says (analytics/stats.py verdicts:
    # faster, slower, no significant difference, too few samples); None with one trial
    speedup_vs_dense_low: float | None = None
    speedup_vs_dense_high: float | None = None
    speedup_vs_dense_verdict: str | None = None
    loss_last_vs_dense: float | None = None  # loss_last minus the dense cell's
    loss_last_vs_dense_relative: float | None = None  # that difference / the dense loss_last
    # FP8 cells (models/float8.py, docs/train.md FP8): mfu above is model FLOPs over the dense
    # BF16 peak (peak_precision bf16), as FP8 results are published; the FP8 peak beside it
    fp8_mode: str | None = None  # "native" (float8 units ran the GEMMs) or "emulated" (torchao)
    fp8_mode_reason: str | None = None  # why: the device's float8 units, or their absence
    fp8_linears_converted: int | None = None  # the blocks' linear layers trained in float8
    fp8_linears_kept: int | None = None  # the blocks' linear layers left in bf16 (their shape)
    fp8_fsdp_float8_all_gather: bool | None = None  # FSDP2 all-gathered fp8 weights
    fp8_peak_flops_per_s_per_device: float | None = None  # the datasheet's dense FP8 peak
    fp8_peak_utilisation: float | None = None  # model FLOPs over it; None when emulated
    fp8_peak_note: str | None = None  # why fp8_peak_utilisation is empty, when it is
    # Mixture of experts (models/moe.py, parallel/expert.py, docs/moe.md): the load of the timed
    # steps per MoE layer and expert, all replicas' tokens; expert parallelism's all-to-all
    moe_tokens_routed_per_expert: list[list[int]] | None = None  # assignments, drops included
    moe_tokens_dropped_per_expert: list[list[int]] | None = None  # over the capacity
    moe_drop_fraction: float | None = None  # dropped / routed, all layers and experts
    moe_load_imbalance: float | None = None  # busiest expert's routed / the mean, worst layer
    all_to_all_time_s_per_rank: list[float | None] | None = None  # in collective_time's step
    all_to_all_fraction: float | None = None  # busiest rank: all-to-all / that step's time


@dataclass(frozen=True)
class PhaseFields:
    """One timed phase of the block benchmark; record keys are '<phase>_<field>'."""

    time_s_median: float | None = None
    time_s_min: float | None = None
    time_s_max: float | None = None
    time_s_iqr: float | None = None
    samples: int | None = None
    few_samples: bool | None = None
    flops: float | None = None
    tflops_per_device: float | None = None
    tokens_per_s_per_device: float | None = None
    mfu: float | None = None


@dataclass(frozen=True)
class BlockMetrics(EnergyFields, MemoryFields, PeakFields, TrialFields):
    """A block micro-benchmark cell (one device); its phases are added by `phase_dict`."""

    tokens_per_step_global: int | None = None


@dataclass(frozen=True)
class PeakMetrics:
    """A measured GEMM peak, stored as its own record and used by every cell of a sweep."""

    peak_flops_per_s_per_device: float | None = None  # the best repetition: a peak
    peak_flops_per_s_median: float | None = None
    peak_flops_per_s_min: float | None = None
    repetitions: int | None = None
    gemm_n: int | None = None
    gemm_layout: str | None = None
    threads: int | None = None
    # Other work used the machine while it was measured (hardware/disturbance.py), on every
    # attempt: measured again after a pause up to PEAK_ATTEMPTS times (bench/peak.py), never
    # reused by a later sweep; the report says which MFUs rest on it.
    disturbed: bool | None = None
    attempts: int | None = None  # measurements made to reach this one (1: undisturbed at once)


@dataclass(frozen=True)
class ProfileMetrics:
    """A machine profile (`accelbench calibrate`): every timed point and what the curves of
    analytics/profile.py are read against."""

    points: list[dict[str, Any]] | None = None  # analytics.profile.point_dict, one a call shape
    peak_flops_per_s_by_dtype: dict[str, float] | None = None  # what efficiency 1.0 stands for
    peak_label_by_dtype: dict[str, str] | None = None  # datasheet dense, or measured
    gemm_flops_per_s_max_by_dtype: dict[str, float] | None = None  # fastest GEMM point
    attention_flops_per_s_max_by_dtype: dict[str, float] | None = None  # fastest attention
    memory_bytes_per_s_max: float | None = None  # fastest streaming point
    collective_ranks: int | None = None  # processes the collectives ran on
    collective_backend: str | None = None  # gloo, nccl, ...
    collective_latency_s_by_op: dict[str, float] | None = None  # least median over sizes
    collective_bus_bytes_per_s_max_by_op: dict[str, float] | None = None  # best busbw
    collective_reason: str | None = None  # why collectives were not measured, when not
    threads: int | None = None  # CPU threads of the compute measurements


@dataclass(frozen=True)
class CheckMetrics:
    """`accelbench check`: the feature matrix of one device (bench/check.py), one entry a
    feature: name, status (ok, unavailable, failed), detail (what was found or why not),
    seconds, values."""

    features: list[dict[str, Any]] | None = None
    features_ok: int | None = None
    features_unavailable: int | None = None
    features_failed: int | None = None
    check_time_s: float | None = None  # the whole matrix, wall clock


@dataclass(frozen=True)
class ScaleRow:
    """One device count of a scaling study's table (bench.scale.scaling_rows); the measured
    fields are None, and absent from the stored row, where the count did not run or none did."""

    devices: int | None = None
    status: str | None = None
    reason: str | None = None
    baseline_devices: int | None = None  # the count the speedups are over
    global_batch: int | None = None
    tokens_per_s_global: float | None = None
    tokens_per_s_per_device: float | None = None
    speedup: float | None = None
    scaling_efficiency: float | None = None
    mfu: float | None = None
    # From trials (bench.scale.speedup_evidence: analytics.stats.compare of this count's
    # per-trial tokens/s against the baseline count's); stored only where they have a value,
    # so a one-trial study's rows are as before trials.
    trials: int | None = None  # this count's trials
    speedup_low: float | None = None  # 95% interval of the speedup (None: too few trials)
    speedup_high: float | None = None
    speedup_verdict: str | None = None  # faster, slower, no significant difference, too few
    scaling_efficiency_low: float | None = None  # the speedup's interval over n / baseline n
    scaling_efficiency_high: float | None = None

    def stored(self) -> dict[str, Any]:
        """The row as a scale record stores it: the measured fields only where it measured,
        the trials' evidence only where there is some."""
        row = asdict(self)
        if self.tokens_per_s_global is None:
            for name in _SCALE_MEASURED:
                row.pop(name)
        for name in _SCALE_EVIDENCE:
            if row[name] is None:
                row.pop(name)
        return row

    @classmethod
    def read(cls, row: dict[str, Any]) -> ScaleRow:
        """A stored row (a key this class does not declare is left out)."""
        return cls(**{f.name: row.get(f.name) for f in fields(cls)})


_SCALE_MEASURED = ("tokens_per_s_global", "tokens_per_s_per_device", "speedup",
                   "scaling_efficiency", "mfu")
_SCALE_EVIDENCE = ("trials", "speedup_low", "speedup_high", "speedup_verdict",
                   "scaling_efficiency_low", "scaling_efficiency_high")


@dataclass(frozen=True)
class ScaleMetrics:
    """A scaling study's table (kind 'scale'), beside its per-count training cells: one row a
    device count (bench.scale.scaling_rows: devices, status, global batch, tokens/s, speedup,
    scaling efficiency, MFU) and the count the speedups are over. Written as the rows' stored
    dicts (ScaleRow.stored); read back (read_metrics) as ScaleRow objects."""

    rows: list[dict[str, Any]] | list[ScaleRow] | None = None
    baseline_devices: int | None = None


@dataclass(frozen=True)
class SeqSearchMetrics:
    """One probe of the longest-sequence search (kind 'seq-search'): whether the length fits,
    and the estimate and budget behind the answer."""

    fits: bool | None = None
    mem_estimate_bytes_per_rank: float | None = None
    mem_budget_bytes_per_rank: float | None = None


@dataclass(frozen=True)
class NoiseMetrics:
    """An A/A check (`accelbench noise`, kind 'noise'): one training configuration measured as
    two identical conditions A and B, interleaved over trials (their cells are 'noise-cell'
    records, TrainMetrics), and B's throughput over A's with its interval. The noise floor is
    the larger distance of that interval's ends from 1 (a fraction): on this machine, today, a
    difference smaller than it cannot be told from run-to-run spread."""

    trials: int | None = None  # trials a condition
    throughput_ratio: float | None = None  # median B tokens/s over median A tokens/s
    throughput_ratio_low: float | None = None  # its 95% interval; None: too few trials
    throughput_ratio_high: float | None = None
    noise_verdict: str | None = None  # analytics/stats.py's word for B against A
    noise_floor: float | None = None  # max(1 - low, high - 1); None without an interval
    interval_confidence: float | None = None  # 0.95
    interval_method: str | None = None  # how the ratio's interval was made, or why none
    step_time_s_median_a: float | None = None  # condition A's median step time (over trials)
    step_time_s_median_b: float | None = None
    tokens_per_s_global_a: float | None = None  # condition A's throughput, all devices
    tokens_per_s_global_b: float | None = None
    disturbed: bool | None = None  # either cell's windows disturbed; None: not judged
    trial_seed: int | None = None  # seed of the order within each round (and the bootstrap)


# The verdict word of a cell or layout that fits, as seq-search's metric is named: the study's
# plan, the plan's JSON and the search's reasons say it (config/fit.py has the other words).
FITS = "fits"


class TrainFigure(StrEnum):
    """A train metric named where no record is: what a published run reports (its oracle
    kind; the published runs' csv names its devices column after n_devices), and the
    envelope's flags. Each is a TrainMetrics field."""

    N_DEVICES = "n_devices"
    MFU = "mfu"
    HFU = "hfu"
    TOKENS_PER_S_PER_DEVICE = "tokens_per_s_per_device"
    TFLOPS_PER_DEVICE = "tflops_per_device"


class ShownFigure(StrEnum):
    """A figure the terminal tables show with its interval (TrialFields.interval's names)."""

    TOKENS_PER_S_GLOBAL = "tokens_per_s_global"
    BLOCK_TOKENS_PER_S = "forward_backward_tokens_per_s_per_device"
    STEP_TIME = "step_time_s_median"  # a training cell's time: what its comparisons divide
    BLOCK_TIME = "forward_backward_time_s_median"  # a block cell's


class StepTimed(StrEnum):
    """A training cell's median step time, then the rates computed from it (TrainMetrics
    fields): the figures a cell measured as trials gives an interval, in that order
    (bench/train/trials.py)."""

    STEP_TIME_S_MEDIAN = "step_time_s_median"
    TOKENS_PER_S_GLOBAL = "tokens_per_s_global"
    TOKENS_PER_S_PER_DEVICE = "tokens_per_s_per_device"
    SAMPLES_PER_S_GLOBAL = "samples_per_s_global"
    SAMPLES_PER_S_PER_DEVICE = "samples_per_s_per_device"
    TFLOPS_PER_DEVICE = "tflops_per_device"
    MFU = "mfu"
    HFU = "hfu"
    FP8_PEAK_UTILISATION = "fp8_peak_utilisation"
    SPARSE_PEAK_UTILISATION = "sparse_peak_utilisation"


class PhaseTimed(StrEnum):
    """A block phase's median time, then the rates computed from it (PhaseFields fields, keyed
    '<phase>_<name>' in a record): the figures a block cell measured as trials gives an
    interval, in that order (workloads/block/runner.py)."""

    TIME_S_MEDIAN = "time_s_median"
    TFLOPS_PER_DEVICE = "tflops_per_device"
    TOKENS_PER_S_PER_DEVICE = "tokens_per_s_per_device"
    MFU = "mfu"


# What a published run may state (analytics/published_runs.py): MFU (a fraction), tokens/s
# per device, or hardware TFLOP/s per device counting recompute (as Megatron-LM reports)
ORACLE_KINDS = (TrainFigure.MFU, TrainFigure.TOKENS_PER_S_PER_DEVICE,
                TrainFigure.TFLOPS_PER_DEVICE)


# Every record kind and the metrics class its records are written from: a kind not here
# declares no metrics, and asking for its names is an error, never another kind's names.
METRICS_BY_KIND: dict[str, type] = {
    "train": TrainMetrics, "block": BlockMetrics, "peak": PeakMetrics,
    "profile": ProfileMetrics, "check": CheckMetrics, "scale": ScaleMetrics,
    "seq-search": SeqSearchMetrics, "noise": NoiseMetrics, "noise-cell": TrainMetrics,
}


@dataclass(frozen=True)
class BlockReading(BlockMetrics):
    """A block record's metrics as read: the cell's fields, and each phase's '<phase>_<field>'
    keys gathered back into its PhaseFields (`reading.forward_backward.mfu`)."""

    forward: PhaseFields = PhaseFields()
    backward: PhaseFields = PhaseFields()
    forward_backward: PhaseFields = PhaseFields()

    def phase(self, name: str) -> PhaseFields:
        """One phase's fields by its name (one of BLOCK_PHASES)."""
        if name not in BLOCK_PHASES:
            raise ValueError(f"phase must be one of {BLOCK_PHASES}, got {name!r}")
        return getattr(self, name)


def metrics_class(kind: str) -> type:
    """The class a record of this kind reads as (block: BlockReading, its phases gathered);
    ValueError for a kind that declares no metrics."""
    metric_names(kind)  # the clear error for an undeclared kind
    return BlockReading if kind == "block" else METRICS_BY_KIND[kind]


def read_metrics(kind: str, metrics: dict[str, Any]) -> Any:
    """A record's metrics dict (already at the current schema version) as its kind's frozen
    class: every declared name as an attribute, None where the dict lacks it. Keys the kind
    does not declare are not in the result: `undeclared_metrics` gives them."""
    cls = metrics_class(kind)
    if cls is BlockReading:
        phases = {p: PhaseFields(**{f.name: metrics.get(f"{p}_{f.name}")
                                    for f in fields(PhaseFields)}) for p in BLOCK_PHASES}
        cell = {f.name: metrics.get(f.name) for f in fields(BlockMetrics)}
        return BlockReading(**cell, **phases)
    if cls is ScaleMetrics:
        rows = metrics.get("rows")
        return ScaleMetrics(rows=None if rows is None else [ScaleRow.read(r) for r in rows],
                            baseline_devices=metrics.get("baseline_devices"))
    return cls(**{f.name: metrics.get(f.name) for f in fields(cls)})


def undeclared_metrics(kind: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """The keys of a record's metrics its kind does not declare (another tool's, or a key a
    migration kept), with their values: kept reachable, never dropped."""
    declared = set(metric_names(kind))
    return {key: value for key, value in metrics.items() if key not in declared}


def metrics_dict(metrics: Any) -> dict[str, Any]:
    """A metrics dataclass as the record's dict (every declared key, None where unmeasured)."""
    return asdict(metrics)


def partial_metrics_dict(cls: type, **values: Any) -> dict[str, Any]:
    """Only `values`, under their record keys, checked against a metrics class's fields."""
    made = cls(**values)
    return {name: getattr(made, name) for name in values}


def phase_dict(phase: str, values: PhaseFields) -> dict[str, Any]:
    """A block phase's fields under their record keys."""
    if phase not in BLOCK_PHASES:
        raise ValueError(f"phase must be one of {BLOCK_PHASES}, got {phase!r}")
    return {f"{phase}_{k}": v for k, v in asdict(values).items()}


def metric_names(kind: str) -> tuple[str, ...]:
    """Every metric key a record of this kind declares; ValueError for an undeclared kind."""
    if kind not in METRICS_BY_KIND:
        raise ValueError(f"record kind {kind!r} declares no metrics (declared kinds: "
                         f"{', '.join(METRICS_BY_KIND)})")
    names = tuple(f.name for f in fields(METRICS_BY_KIND[kind]))
    if kind == "block":
        return names + tuple(f"{p}_{f.name}" for p in BLOCK_PHASES for f in fields(PhaseFields))
    return names
