"""The training cell's record kinds: 'train' (train, genslm, scale cells) and 'noise-cell' (an
A/A check's conditions), both written from TrainMetrics; the spec fields a training sweep
sweeps, and the train figures named where no record is."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from accelbench.config.records.base import ComparedFigure, RecordKind
from accelbench.config.records.fields import (
    CommFields,
    EnergyFields,
    MemoryFields,
    PeakFields,
    RecordSpec,
    ShownFigure,
    TopologyFields,
    TrialFields,
)

# A training spec's swept list fields and the cell field each becomes, outermost first
# (the sweep order: dtype, then recompute, sequence, GAS, micro-batch, sparsity).
TRAIN_SWEPT: dict[str, str] = {"dtypes": "dtype", "recomputes": "recompute",
                               "seq_lens": "seq_len", "gas": "gas",
                               "micro_batches": "micro_batch", "sparsities": "sparsity"}


@dataclass(frozen=True)
class StepFields:
    """A training cell's steps: their time (the slowest rank's pace), the rates and FLOPs
    computed from it, each rank's compute and wait, data loading and loss."""

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
    # stands out of its peers' noise, and the evidence (analytics/slow_rank.py)
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


@dataclass(frozen=True)
class DivergenceFields:
    """A run whose loss stopped being finite, and where (its later steps measure nothing)."""

    diverged_step: int | None = None  # 1-based step whose loss was not finite


@dataclass(frozen=True)
class SparsityFields:
    """A weight-sparse cell (models/weight_masks.py, docs/sparsity.md) against its dense
    peer of the same sweep; MFU stays dense-equivalent."""

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


@dataclass(frozen=True)
class Fp8Fields:
    """An FP8 cell (models/float8.py, docs/train.md FP8): mfu is model FLOPs over the dense
    BF16 peak (peak_precision bf16), as FP8 results are published; the FP8 peak beside it."""

    fp8_mode: str | None = None  # "native" (float8 units ran the GEMMs) or "emulated" (torchao)
    fp8_mode_reason: str | None = None  # why: the device's float8 units, or their absence
    fp8_linears_converted: int | None = None  # the blocks' linear layers trained in float8
    fp8_linears_kept: int | None = None  # the blocks' linear layers left in bf16 (their shape)
    fp8_fsdp_float8_all_gather: bool | None = None  # FSDP2 all-gathered fp8 weights
    fp8_peak_flops_per_s_per_device: float | None = None  # the datasheet's dense FP8 peak
    fp8_peak_utilisation: float | None = None  # model FLOPs over it; None when emulated
    fp8_peak_note: str | None = None  # why fp8_peak_utilisation is empty, when it is


@dataclass(frozen=True)
class MoeFields:
    """Mixture of experts (models/moe.py, parallel/expert.py, docs/moe.md): the load of the
    timed steps per MoE layer and expert, all replicas' tokens; expert parallelism's all-to-all."""

    moe_tokens_routed_per_expert: list[list[int]] | None = None  # assignments, drops included
    moe_tokens_dropped_per_expert: list[list[int]] | None = None  # over the capacity
    moe_drop_fraction: float | None = None  # dropped / routed, all layers and experts
    moe_load_imbalance: float | None = None  # busiest expert's routed / the mean, worst layer
    all_to_all_time_s_per_rank: list[float | None] | None = None  # in collective_time's step
    all_to_all_fraction: float | None = None  # busiest rank: all-to-all / that step's time


# The groups listed in reverse of their field order: a dataclass takes its last base's fields
# first and its first base's last; the export's columns follow that order (report/export.py,
# via metric_names), so a group added here goes first and its columns last.
@dataclass(frozen=True)
class TrainMetrics(MoeFields, Fp8Fields, SparsityFields, DivergenceFields, CommFields, StepFields,
                   EnergyFields, MemoryFields, PeakFields, TopologyFields, TrialFields):
    """A training cell (train, genslm, scale): one device is the one-rank case of N ranks."""


class TrainFigure(StrEnum):
    """A train metric named where no record is: what a published run reports (its oracle
    kind; the published runs' csv names its devices column after n_devices), and the
    envelope's flags. Each is a TrainMetrics field."""

    N_DEVICES = "n_devices"
    MFU = "mfu"
    HFU = "hfu"
    TOKENS_PER_S_PER_DEVICE = "tokens_per_s_per_device"
    TFLOPS_PER_DEVICE = "tflops_per_device"


class StepTimed(StrEnum):
    """A training cell's median step time, then the rates computed from it (TrainMetrics
    fields): the figures a cell measured as trials gives an interval, in that order
    (bench/train/cell_trials.py)."""

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


# What a published run may state (analytics/published_run.py): MFU (a fraction), tokens/s
# per device, or hardware TFLOP/s per device counting recompute (as Megatron-LM reports)
ORACLE_KINDS = (TrainFigure.MFU, TrainFigure.TOKENS_PER_S_PER_DEVICE,
                TrainFigure.TFLOPS_PER_DEVICE)


@dataclass(frozen=True)
class TrainRecordSpec(RecordSpec):
    """A training cell's spec as stored (bench/train/spec.py's TrainSpec, one cell's values, and
    what a scale study, a longest-sequence search or a noise check adds)."""

    tokenizer: str | None = None
    loss_impl: str | None = None
    compute_weights: str | None = None
    tokens: int | None = None
    warmup_steps: int | None = None
    time_budget_s: float | None = None
    lr: float | None = None
    min_lr_ratio: float | None = None
    lr_warmup_steps: int | None = None
    weight_decay: float | None = None
    grad_clip: float | None = None
    seed: int | None = None
    max_micro_batch: bool | None = None
    init_checkpoint: str | None = None
    cell_timeout_s: float | None = None
    hang_timeout_s: float | None = None
    micro_batch_search: dict[str, Any] | None = None  # how --max-micro-batch found its batch
    scale_devices: int | None = None  # a scaling study's cell: its device count
    scale_mode: str | None = None  # strong or weak
    seq_search: dict[str, Any] | None = None  # a longest-sequence search's chosen cell
    noise_condition: str | None = None  # an A/A check's condition, A or B


def step_figure(m: TrainMetrics, s: TrainRecordSpec) -> ComparedFigure:
    """What a training cell is compared on: its tokens a step over the step's time."""
    return ComparedFigure(m.tokens_per_step_global, m.step_time_s_median, m.step_time_s_min,
                          m.step_time_s_max, m.step_time_s_iqr, m.interval(ShownFigure.STEP_TIME),
                          m.n_devices or 1, s.token_unit or "token", m.mfu, m.tflops_per_device)


KINDS = {"train": RecordKind(TrainMetrics, spec=TrainRecordSpec, cell=True, compared=step_figure),
         "noise-cell": RecordKind(TrainMetrics, spec=TrainRecordSpec, cell=True, condition=True,
                                  machine_context=True)}
