"""A device's peak memory (bytes) for a layout: model states, in-flight activations, buffers.

The measured benchmarks call these before allocating, to refuse a cell that cannot fit, and
record the estimate beside the measured peak. What one layer keeps is in activations.py, the
model states under ZeRO in model_states.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.activations import (
    EAGER,
    Kernels,
    activation_bytes_per_layer,
    kv_width_per_rank,
)
from accelbench.analytics.model_states import ModelStateBytes, block_sizes, stage_state_bytes
from accelbench.analytics.params import block_matmul_params, block_params
from accelbench.analytics.training_widths import BYTES_PER_VALUE, training_widths
from accelbench.config.fit import FITS
from accelbench.config.layer_split import rank_layer_counts
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.vocab import GB


def block_train_bytes(cfg: ModelConfig, seq_len: int, batch: int, dtype: str,
                      fused_attention: bool = False) -> float:
    """Peak estimate for timing one block forward and backward in `dtype` (micro-benchmark).

    Weights and their gradients, the layer's saved activations, the block's input, its gradient
    and the output gradient (3 * s*b*h values), and backward's transient working set: the MLP
    hidden's gradient and its GELU input's (2 * s*b*f values) and one MLP weight gradient (h*f).
    """
    width = BYTES_PER_VALUE[dtype]
    weights_and_grads = 2 * block_params(cfg) * width
    io = 3 * seq_len * batch * cfg.d_model * width
    transient = (2 * seq_len * batch + cfg.d_model) * cfg.ffn_dim * width
    acts = activation_bytes_per_layer(cfg, seq_len, batch, width, fused_attention=fused_attention)
    return weights_and_grads + io + transient + acts


# --- Pipeline in-flight activations, buffers, the peak (the planner's memory) ---

WORKSPACE_BYTES = 1 * GB  # runtime context, GEMM workspaces, collective buffers: an assumption
# A CPU process has no device context to pay for, and its measured memory is malloc's bytes in
# use (bench/peak_memory.py), not RSS with the freed blocks glibc keeps: beyond the tensors it
# counts only MKL's GEMM packing buffers, which MKL's memory manager allocates on a process's
# first GEMMs and keeps (18 MiB for gpt2-tiny's head, measured; 0 with MKL_DISABLE_FAST_MM), so
# only the first cell of a process pays them. Counted as none: the quick study's cells then
# measure within 10% of the estimate, first cells included (benchmarks/cpu_memory_estimate.py,
# docs/metrics.md).
CPU_WORKSPACE_BYTES = 0
USABLE_FRACTION = 0.92  # the allocator's fragmentation and reserve leave ~8% unusable: assumed


def inflight_layer_microbatches(n_layer: int, pp: int, vp: int, n_micro: int,
                                rank: int = 0, stage_layers: float | None = None) -> float:
    """Layer activations (in units of one layer, one micro-batch) pipeline rank `rank` holds.

    1F1B: rank r runs p-r forwards before its first backward, so the first stage holds
    min(p, m) micro-batches of L/p layers (= L when m >= p), or of `stage_layers` when stages
    are uneven. Interleaved with v chunks: Megatron's warm-up of 2(p-r-1) + (v-1)p chunks plus
    one, each of L/(pv) layers; on the first stage L(1 + (p-1)/(pv)), the factor of Korthikanti
    et al. sec. 4.2.3.
    """
    if vp == 1:
        return min(pp - rank, n_micro) * (n_layer / pp if stage_layers is None else stage_layers)
    chunks = min(2 * (pp - rank - 1) + (vp - 1) * pp + 1, n_micro * vp)
    return chunks * n_layer / (pp * vp)


def logits_bytes(cfg: ModelConfig, seq_len: int, micro_batch: int, dtype: str, tp: int,
                 cp: int = 1, fused_loss: bool = False) -> float:
    """The loss's peak over the logits, split over `tp` (pass tp=1 for a replicated head) and
    over the cp ranks' sequence chunks: the logits in the activation width, then, when
    backward reaches the fp32 cross-entropy, the saved log-softmax output, its gradient and the
    logits' fp32 gradient live at once (3 x 4 bytes; counting only logits + one fp32 copy
    under-read measured CPU peaks by 2x). A fused loss keeps the logits alone."""
    width = training_widths(dtype).activations
    return seq_len * micro_batch * cfg.vocab_size / tp / cp * (width + (0 if fused_loss
                                                                         else 12))


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes one device holds at peak (its worst pipeline stage) against what it can use."""

    states: ModelStateBytes
    activations: float
    buffers: float
    usable_bytes: float
    masks: float = 0.0  # weight sparsity's boolean masks (one byte per masked weight held)
    # whose widths the states are counted in: "published" (a published stack's: 16-bit weights
    # and gradients, fp32 master and moments) or "runtime" (accelbench's own, runtime_memory.py)
    widths: str = "published"
    moment: str = "sum"  # when the peak is: "sum" adds every part; runtime_memory names one

    @property
    def total(self) -> float:
        """Model states, activations, buffers and sparsity masks."""
        return self.states.total + self.activations + self.buffers + self.masks

    @property
    def fits(self) -> bool:
        """Whether the estimate is within the usable part of device memory."""
        return self.total <= self.usable_bytes

    def to_dict(self) -> dict[str, float | bool]:
        """Plain dict (bytes) for JSON output and result records."""
        return {"params_bytes": self.states.params, "grads_bytes": self.states.grads,
                "optimizer_bytes": self.states.optimizer, "activations_bytes": self.activations,
                "buffers_bytes": self.buffers, "masks_bytes": self.masks,
                "total_bytes": self.total,
                "usable_bytes": self.usable_bytes, FITS: self.fits,
                "widths": self.widths, "moment": self.moment}


def ring_buffer_bytes(cfg: ModelConfig, seq_len: int, micro_batch: int, dtype: str, tp: int,
                      cp: int) -> float:
    """Context parallelism's ring attention: the K and V chunk in use and the one arriving
    (2 x 2 x s/cp x b x kv values per rank); zero without cp."""
    if cp == 1:
        return 0.0
    kv = kv_width_per_rank(cfg, tp) / tp
    return 4 * seq_len / cp * micro_batch * kv * training_widths(dtype).activations


def buffer_bytes(cfg: ModelConfig, seq_len: int, micro_batch: int, dtype: str, tp: int,
                 zero: int, recompute: str, fused_attention: bool = False,
                 sp: bool = False, cp: int = 1,
                 workspace_bytes: float = WORKSPACE_BYTES) -> float:
    """Workspace, ZeRO-3's gathered weights of two blocks (one prefetched), under full
    recompute the working set of the one block being recomputed (sp: sequence parallel), and
    context parallelism's K/V ring buffers."""
    widths = training_widths(dtype)
    gathered = 2 * block_sizes(cfg)[0] / tp * widths.weights if zero == 3 else 0.0
    rerun = 0.0
    if recompute == "full":
        rerun = activation_bytes_per_layer(cfg, seq_len, micro_batch, widths.activations, tp, sp,
                                           fused_attention=fused_attention, cp=cp)
    ring = ring_buffer_bytes(cfg, seq_len, micro_batch, dtype, tp, cp)
    return workspace_bytes + gathered + rerun + ring


def stages_to_check(layout: Layout, n_layer: int) -> list[tuple[int, str, float]]:
    """(rank, stage kind, layers on the rank) of the stages that can hold the most: the first,
    the last and, with uneven stages, the second (the fullest of the middle ones)."""
    pp = layout.pp
    counts = rank_layer_counts(layout, n_layer) if layout.uneven else None
    if counts is None:
        per = n_layer / pp
        return [(0, "first", per), (pp - 1, "last", per)]
    ranks = [(0, "first"), (pp - 1, "last")] + ([(1, "middle")] if pp > 2 else [])
    return [(rank, kind, float(counts[rank])) for rank, kind in ranks]


def sparsity_mask_bytes(cfg: ModelConfig, layout: Layout, layers: float,
                        sparsity: float) -> float:
    """The masks one rank holds: a bool per masked weight of its layers' block matrices, split
    like the weights (tp; under ZeRO-3 also dp x cp), as accelbench's runtime keeps them."""
    if not sparsity:
        return 0.0
    shards = layout.tp * (layout.dp * layout.cp if layout.zero == 3 else 1)
    return layers * block_matmul_params(cfg) / shards


def memory_per_device(cfg: ModelConfig, seq_len: int, layout: Layout, n_micro: int,
                      dtype: str = "bf16", optimizer: str = "adam",
                      memory_bytes: float = float("inf"),
                      fused_attention: bool = False,
                      vocab_parallel: bool = True, sparsity: float = 0.0,
                      kernels: Kernels = EAGER,
                      workspace_bytes: float = WORKSPACE_BYTES) -> MemoryBreakdown:
    """Peak bytes per device for a layout: the worst of the first, the last and (uneven
    stages) the fullest middle pipeline stage.

    `n_micro` is the number of micro-batches per step per pipeline (gradient accumulation).
    fused_attention: the attention scores are never stored (flash / memory-efficient SDPA, as
    accelbench's own model runs). The planner passes TrainSetup.fused_attention (default on);
    the published runs say per run whether they stored the scores.
    vocab_parallel=False: embedding, head and logits are whole on every tensor rank (accelbench's
    own tensor parallel); the planner assumes Megatron's vocabulary-parallel split.
    Context parallelism splits every sequence over cp ranks and, as Megatron does, shards ZeRO
    state over dp x cp (both reduce the gradients). sparsity > 0 adds the masks of the stage
    with the most layers (sparsity_mask_bytes). `kernels`: what the framework's kernels save
    (Kernels). `workspace_bytes`: the fixed runtime share (CPU_WORKSPACE_BYTES for a CPU cell).
    """
    widths = training_widths(dtype)
    tp, pp, cp = layout.tp, layout.pp, layout.cp
    per_layer = activation_bytes_per_layer(cfg, seq_len, layout.mb, widths.activations, tp,
                                           layout.sp, layout.recompute, fused_attention, cp,
                                           kernels)
    logits = logits_bytes(cfg, seq_len, layout.mb, dtype, tp if vocab_parallel else 1, cp,
                          kernels.fused_loss)
    gemm_per_layer = block_sizes(cfg)[1] / tp if widths.fp8 else 0.0
    worst: tuple[float, ModelStateBytes, float] | None = None
    for rank, stage, layers in stages_to_check(layout, cfg.n_layer):
        states = stage_state_bytes(cfg, layout, stage, layers, dtype, optimizer,
                                   gemm_per_layer * layers, vocab_parallel)
        held = inflight_layer_microbatches(cfg.n_layer, pp, layout.vp, n_micro, rank, layers)
        acts = per_layer * held + (logits if rank == pp - 1 else 0.0)
        if worst is None or states.total + acts > worst[0]:
            worst = (states.total + acts, states, acts)
    assert worst is not None
    buffers = buffer_bytes(cfg, seq_len, layout.mb, dtype, tp, layout.zero, layout.recompute,
                           fused_attention, layout.sp, cp, workspace_bytes)
    layers = max(held for _, _, held in stages_to_check(layout, cfg.n_layer))
    return MemoryBreakdown(states=worst[1], activations=worst[2], buffers=buffers,
                           usable_bytes=memory_bytes * USABLE_FRACTION,
                           masks=sparsity_mask_bytes(cfg, layout, layers, sparsity))


def fits(cfg: ModelConfig, seq_len: int, layout: Layout, n_micro: int, memory_bytes: float,
         dtype: str = "bf16", optimizer: str = "adam") -> bool:
    """Whether a layout's estimated peak fits in `memory_bytes` of device memory."""
    return memory_per_device(cfg, seq_len, layout, n_micro, dtype, optimizer, memory_bytes).fits
