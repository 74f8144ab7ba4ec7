"""What accelbench's own runtime allocates a rank (bytes), layout by layout and precision by
precision, at the two moments one of which is a step's peak; no torch.

The planner (analytics/memory.py memory_per_device) counts a published stack's widths: 16-bit
weights and gradients beside a 12-byte fp32 master and moments, split by the ZeRO stage. This
runtime keeps other widths (RUNTIME_WIDTHS), measured a phase at a time on gpt2 (docs/metrics.md):
fp32 parameters, fp32 gradients and fp32 AdamW moments whatever the precision (autocast casts a
weight for each use), DistributedDataParallel's buckets (a second copy of every gradient unless
the gradients are views of them), ZeroRedundancyOptimizer sharding the moments only, FSDP2's
unsharded parameters (every block from forward to backward at ZeRO-2; at ZeRO-3 the root and
two blocks, the one running and the one prefetched), and the flat all-reduce copy of a
tensor-parallel or pipelined data-parallel step. Its peak is the larger of
- the end of the forward (`FORWARD_END`): the states kept across steps, the activations, the
  16-bit (fp8: 8-bit) copies autocast made of the GEMM weights, which autograd keeps for the
  backward, FSDP2's unsharded parameters, and the head's gradient, the backward's first;
- the end of the backward (`BACKWARD_END`): the states, every gradient, DDP's buckets, a flat
  all-reduce copy, and a tied embedding's gradient, which the embedding's backward makes whole
  before adding it to the head's (V x h values in the gradient's width, one to three of them
  alive at once: _tied_copies).
Each MemoryBreakdown it returns names the widths (`widths="runtime"`) and the moment.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.activations import RUNTIME_KERNELS, Kernels, activation_bytes_per_layer
from accelbench.analytics.memory import (
    MemoryBreakdown,
    inflight_layer_microbatches,
    logits_bytes,
    stages_to_check,
)
from accelbench.analytics.model_states import ModelStateBytes, block_sizes, stage_params
from accelbench.analytics.moe_cost import stage_split
from accelbench.analytics.training_widths import training_widths
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.runtime_settings import (
    DDP,
    FSDP,
    GRAD_SYNC,
    LEAN,
    PIPELINE,
    RuntimeSettings,
    dp_wrapper,
    mixed_precision,
    reduce_bytes,
)

RUNTIME = "runtime"  # MemoryBreakdown.widths of this module's estimates
FORWARD_END, BACKWARD_END = "end of forward", "end of backward"
OPTIMIZER_STEP = "optimizer step"  # bf16 weights: the masters' fp32 gradients beside the bf16


@dataclass(frozen=True)
class RuntimeWidths:
    """Bytes per parameter as this runtime keeps it: fp32 weights (the master copy), fp32
    gradients, fp32 AdamW moments (exp_avg, exp_avg_sq); `cast`, the copy autocast makes of a
    block GEMM weight for compute and autograd keeps for the backward (2 in bf16/fp16, 1 in
    fp8: torchao's float8 weight; 0 in fp32), `head_cast` the same of the output head (fp8
    cells run it in bf16); `gathered`, an FSDP2-unsharded parameter (2 under its bf16 policy);
    `grad`, a gradient as the backward makes it (2 under that policy); `reduce`, the width it is
    reduced in."""

    weights: int = 4
    grads: int = 4
    moments: int = 8
    cast: int = 0
    head_cast: int = 0
    gathered: int = 4
    grad: int = 4
    reduce: int = 4
    master_grads: int = 0  # --compute-weights bf16: the masters' fp32 gradients at the step


# --compute-weights bf16 (bench/train/bf16_weights.py): bf16 weights beside their fp32 masters
# (2 + 4), bf16 gradients, no autocast copies; the masters' fp32 gradients are made from the
# bf16 ones before the optimizer step: a moment of its own (OPTIMIZER_STEP), the activations
# and the backward's transients gone
BF16_WEIGHTS = RuntimeWidths(weights=6, grads=2, grad=2, master_grads=4)


def runtime_widths(precision: str, layout: Layout = Layout(),
                   settings: RuntimeSettings = LEAN,
                   compute_weights: str = "fp32") -> RuntimeWidths:
    """The widths of a cell in `precision` on this (placed) layout with these settings."""
    if compute_weights == "bf16":  # one process, bf16 cells only (validated)
        return BF16_WEIGHTS
    if mixed_precision(settings, layout, precision):  # FSDP2 gathers bf16 for compute
        return RuntimeWidths(gathered=2, grad=2, reduce=reduce_bytes(settings, layout, precision))
    compute = training_widths(precision).activations
    if compute == 4:
        return RuntimeWidths()
    fp8 = training_widths(precision).fp8
    return RuntimeWidths(cast=1 if fp8 else compute, head_cast=compute)


@dataclass(frozen=True)
class _Stage:
    """One pipeline rank's parameters (dense and expert, each split as this rank holds them,
    before any ZeRO split), its GEMM weights and the output head's, the parameters of FSDP2's
    root unit, and the activations it holds at the end of its forwards."""

    rank: int
    layers: float
    dense: float
    expert: float
    gemm: float
    head: float
    root: float
    activations: float


def _stage(cfg: ModelConfig, seq_len: int, layout: Layout, n_micro: int, precision: str,
           kernels: Kernels, rank: int, kind: str, layers: float) -> _Stage:
    """One stage's parameters (the embedding and head whole on every tensor rank, as this
    runtime keeps them) and in-flight activations (the last stage's logits too)."""
    params = stage_params(cfg, layout.tp, layout.pp, kind, False, layers)
    dense, expert = (stage_split(cfg, params, layout.tp, layout.ep, layers) if cfg.n_experts
                     else (params, 0.0))
    width = training_widths(precision).activations
    per_layer = activation_bytes_per_layer(cfg, seq_len, layout.mb, width, layout.tp, layout.sp,
                                           layout.recompute, True, layout.cp, kernels)
    held = inflight_layer_microbatches(cfg.n_layer, layout.pp, layout.vp, n_micro, rank, layers)
    last = rank == layout.pp - 1
    acts = per_layer * held + (logits_bytes(cfg, seq_len, layout.mb, precision, 1, layout.cp)
                               if last else 0.0)
    head = cfg.padded_vocab * cfg.d_model if last else 0.0  # tied or not, the head's GEMM
    root = params - layers * block_sizes(cfg)[0] / layout.tp
    return _Stage(rank, layers, dense, expert, layers * block_sizes(cfg)[1] / layout.tp, head,
                  root, acts)


def _kept_states(stage: _Stage, layout: Layout, w: RuntimeWidths) -> tuple[float, float, float]:
    """(parameters, gradients, moments) kept across steps: ZeRO shards moments (1), gradients
    (2, FSDP2) and parameters (2 and 3: FSDP2 always shards what it keeps) over dp x cp; an
    expert's over the dp x cp / ep ranks that hold it."""
    group = layout.dp * layout.cp
    shards = ((stage.dense, group), (stage.expert, max(group // layout.ep, 1)))

    def split(width: int, from_stage: int) -> float:
        return sum(width * n / (g if layout.zero >= from_stage else 1) for n, g in shards)

    return split(w.weights, 2), split(w.grads, 2), split(w.moments, 1)


def _fsdp_unsharded(stage: _Stage, layout: Layout, w: RuntimeWidths) -> float:
    """FSDP2's unsharded parameters at the end of the forward: every unit at ZeRO-2 (nothing
    resharded after the forward); at ZeRO-3 the root (its parameters stay gathered for the
    backward that follows) and two blocks, the one running and the one prefetched."""
    whole = stage.dense + stage.expert  # this rank's experts whole once gathered over edp
    if layout.zero == 2:
        return w.gathered * whole
    per_block = (whole - stage.root) / max(stage.layers, 1.0)
    return w.gathered * (stage.root + min(2.0, stage.layers) * per_block)


def _forward_end(stage: _Stage, layout: Layout, w: RuntimeWidths, wrapper: str,
                 n_micro: int, grads: float) -> tuple[float, float]:
    """(gradients held, buffers) at the end of the forward: earlier micro-batches' gradients
    (accumulated locally, n_micro > 1), autocast's weight copies, FSDP2's unsharded blocks and
    the head's gradient (made first in the backward, while the activations are all alive; under
    autocast in the cast's width, then in fp32: both for a moment)."""
    held = grads if n_micro > 1 and layout.zero < 2 else 0.0
    casts = w.cast * stage.gemm + w.head_cast * stage.head
    unsharded = _fsdp_unsharded(stage, layout, w) if wrapper == FSDP else 0.0
    if wrapper == FSDP and w.gathered < 4:
        casts = 0.0  # the policy's bf16 parameters are what the GEMMs use
    # the head's gradient as its GEMM makes it (in the cast's width) and its copy in the
    # parameter's width it is added in as, alive together for a moment
    head_grad = (w.grad + (w.head_cast if casts else 0)) * stage.head
    return held, casts + unsharded + head_grad


def _tied_copies(w: RuntimeWidths, wrapper: str, settings: RuntimeSettings) -> int:
    """Whole V x h gradients alive beside a tied embedding's own as its backward ends, as
    measured on gpt2 (docs/metrics.md): the embedding's new gradient; in fp32 also the sum it
    is added into the head's as (under autocast the head's gradient arrives as a fresh fp32
    cast, summed in place); with DDP's gradients as bucket views, the copy into the bucket."""
    return 1 + (w.cast == 0) + (wrapper == DDP and settings.ddp_views)


def _backward_end(stage: _Stage, layout: Layout, w: RuntimeWidths, wrapper: str,
                  cfg: ModelConfig, settings: RuntimeSettings) -> float:
    """Buffers beside every gradient at the end of the backward: a flat copy of one group's for
    its all-reduce (DataParallelGradSync, a pipeline's dp average), a tied embedding's whole
    gradient before it is added to the head's, and under FSDP2 the root's unsharded
    parameters and gradient (or, once resharded, its gradient, its cast and the
    reduce-scatter's input)."""
    ranks = layout.dp * layout.cp
    flat = 0.0  # one group's gradients at a time: dense over dp x cp, experts over dp x cp / ep
    if wrapper in (GRAD_SYNC, PIPELINE):
        flat = w.grads * max(stage.dense if ranks > 1 else 0.0,
                             stage.expert if ranks // layout.ep > 1 else 0.0)
    tied = cfg.tie_embeddings and layout.pp == 1
    embedding = w.grad * cfg.padded_vocab * cfg.d_model if tied else 0.0
    embedding *= _tied_copies(w, wrapper, settings)
    if wrapper != FSDP:
        return flat + embedding
    # the root's last backward: its parameters and gradient unsharded beside the embedding's;
    # then its gradient, its copy cast to the reduction width where that differs (the bf16
    # policy's fp32 reduction), and the reduce-scatter's input in that width
    cast = w.reduce if w.reduce != w.grad else 0
    return max((w.gathered + w.grad) * stage.root + embedding,
               (w.grad + cast + w.reduce) * stage.root)


def runtime_memory_per_device(cfg: ModelConfig, seq_len: int, layout: Layout, n_micro: int,
                              precision: str, settings: RuntimeSettings = LEAN,
                              workspace_bytes: float = 0.0,
                              kernels: Kernels = RUNTIME_KERNELS,
                              compute_weights: str = "fp32") -> MemoryBreakdown:
    """The peak bytes one rank of accelbench's runtime holds for this cell: the worst pipeline
    stage at the worse of its two moments (module docstring). `layout` is the cell's (cp as
    cp: its activations are 1/cp; the runtime places cp ranks as dp ranks, as counted here)."""
    placed = Layout(**{**layout.to_dict(), "dp": layout.dp * layout.cp, "cp": 1})
    wrapper = dp_wrapper(placed, bool(cfg.n_experts) and layout.sp)
    w = runtime_widths(precision, placed, settings, compute_weights)
    worst: MemoryBreakdown | None = None
    for rank, kind, layers in stages_to_check(layout, cfg.n_layer):
        stage = _stage(cfg, seq_len, layout, n_micro, precision, kernels, rank, kind, layers)
        params, grads, moments = _kept_states(stage, layout, w)
        buckets = w.grads * (stage.dense + stage.expert) if wrapper == DDP else 0.0
        # with gradients as bucket views the buckets hold the gradients: none beside them
        grads_beside = 0.0 if wrapper == DDP and settings.ddp_views else grads
        held, forward_buffers = _forward_end(stage, layout, w, wrapper, n_micro, grads_beside)
        forward = MemoryBreakdown(ModelStateBytes(params, held, moments), stage.activations,
                                  buckets + forward_buffers + workspace_bytes, float("inf"),
                                  widths=RUNTIME, moment=FORWARD_END)
        backward = MemoryBreakdown(
            ModelStateBytes(params, grads_beside, moments), 0.0,
            buckets + _backward_end(stage, layout, w, wrapper, cfg, settings) + workspace_bytes,
            float("inf"), widths=RUNTIME, moment=BACKWARD_END)
        step = MemoryBreakdown(  # bf16 weights: the masters' fp32 gradients, made at the step
            ModelStateBytes(params, grads_beside, moments), 0.0,
            w.master_grads * (stage.dense + stage.expert) + workspace_bytes, float("inf"),
            widths=RUNTIME, moment=OPTIMIZER_STEP)
        for moment in (forward, backward, step):
            if worst is None or moment.total > worst.total:
                worst = moment
    assert worst is not None
    return worst
