"""Memory estimates (bytes): activations after Korthikanti et al. 2022, and what a run holds.

The measured benchmarks call these before allocating, to refuse a cell that cannot fit, and
record the estimate beside the measured peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from accelbench.analytics.flops import forward_matmuls
from accelbench.analytics.moe_cost import (
    moe_fraction,
    moe_tokens,
    routed_assignments,
    stage_split,
)
from accelbench.analytics.params import block_matmul_params, block_params
from accelbench.analytics.precision import BYTES_PER_VALUE, training_widths
from accelbench.config.fit import FITS
from accelbench.config.layout import Layout, rank_layer_counts
from accelbench.config.model import ModelConfig
from accelbench.config.vocab import GB, RECOMPUTE_KINDS, ZERO_STAGES

__all__ = ["BYTES_PER_VALUE"]  # re-exported: the width of one value lives in precision.py


@lru_cache(maxsize=64)
def block_sizes(cfg: ModelConfig) -> tuple[int, int]:
    """(parameters, GEMM weights) of one block, from accelbench.analytics.params; cached, as
    the planner asks for them for every layout it evaluates."""
    return block_params(cfg), block_matmul_params(cfg)


def kv_width_per_rank(cfg: ModelConfig, tp: int) -> float:
    """Key (or value) width one tensor rank holds, times tp: kv_heads x head_dim split over tp
    when tp divides the KV heads, else one KV head on each rank (Megatron replicates them)."""
    return max(cfg.kv_heads, tp) * cfg.head_dim


@dataclass(frozen=True)
class Kernels:
    """What a framework's kernels save for backward where they differ from the default (eager
    PyTorch with dropout, as Korthikanti et al. count): fused_mlp, Megatron-Core's fused SwiGLU
    and RoPE (mlp_saved_per_token; RoPE rotates in place, no extra copy); dropout False, a
    model trained without dropout (Llama, MPT; accelbench's own model), whose masks are not
    kept; fused_loss, a fused cross-entropy (flash-attn's, llm-foundry's default) that keeps
    the 16-bit logits and writes their gradient in place (logits_bytes); selective, what
    selective recompute keeps and reruns (flops.SELECTIVE_POLICIES: "attention", Korthikanti's;
    "every_other_mm", torchtitan's op-level policy: selective_op_bytes_per_layer)."""

    fused_mlp: bool = False
    dropout: bool = True
    fused_loss: bool = False
    selective: str = "attention"
    # context parallelism: False, Megatron's ring (chunk buffers only: ring_buffer_bytes); True,
    # the whole sequence's keys and values all-gathered in every layer and kept for its backward
    # (accelbench's runtime, parallel/context.py): cp_gathered_kv_bytes a layer
    cp_gathered: bool = False


EAGER = Kernels()
# accelbench's own runtime (bench/train/cell.py; the planner's view of this machine's cells,
# analytics/measured_steps.py): SDPA attention, eager GELU/SwiGLU and loss, keys and values
# all-gathered under cp. Its model has no dropout, yet `dropout` stays True: the masks' 2sbh
# stand in for what the count leaves out, the fp32 residual the norms save (4 bytes, not 2)
# and, under rotary embeddings, the attention output's copy (the census in docs/metrics.md)
RUNTIME_KERNELS = Kernels(cp_gathered=True)


def mlp_saved_per_token(cfg: ModelConfig, fused_mlp: bool = False,
                        ffn_dim: int | None = None) -> int:
    """16-bit bytes the MLP's split part saves per token: GELU input and output (2f each);
    SwiGLU's gate output (silu input), up output, silu output and product (down input): 8f;
    Megatron-Core's fused SwiGLU (bias_swiglu_fusion) saves only its [gate | up] input and
    recomputes the rest in backward: 4f, plus the down projection's input 2f = 6f. f is the
    model's ffn_dim unless given (an expert's width)."""
    f = cfg.ffn_dim if ffn_dim is None else ffn_dim
    if cfg.activation != "swiglu":
        return 4 * f
    return 6 * f if fused_mlp else 8 * f


def moe_activation_delta(cfg: ModelConfig, tokens: int, tp: int,
                         fused_mlp: bool = False, sp: bool = False) -> float:
    """Bytes an average layer saves beyond the dense layer's count (moe_cost.moe_fraction of
    the layers are MoE): an MoE layer saves, per routed assignment (capacity padding
    included), its permuted input (2h) and its expert's intermediates, plus its shared
    experts' intermediates and its router's scores (2 x E per token), in place of the dense
    MLP's intermediates (split over tp). Under sequence parallelism the MoE part is of this
    rank's tokens / tp (moe_cost.moe_tokens)."""
    fraction = moe_fraction(cfg)
    if not fraction:
        return 0.0
    own = moe_tokens(tokens, tp, sp)
    per_assignment = 2 * cfg.d_model + mlp_saved_per_token(cfg, fused_mlp, cfg.expert_ffn_dim)
    routed = routed_assignments(cfg, own) * per_assignment
    shared = own * mlp_saved_per_token(cfg, fused_mlp, cfg.n_shared_experts * cfg.expert_ffn_dim)
    dense = tokens * mlp_saved_per_token(cfg, fused_mlp) / tp
    return fraction * (routed + shared + 2 * own * cfg.n_experts - dense)


def layer_activation_terms(cfg: ModelConfig, seq_len: int, micro_batch: int, tp: int = 1,
                           kernels: Kernels = EAGER) -> tuple[float, float, float]:
    """Bytes (16-bit) one layer saves, split as tensor parallelism splits them.

    Korthikanti et al. 2022 sec. 4.1, with the MLP and the keys/values at their real widths.
    Returns (replicated, split, scores): replicated = norm inputs (2sbh each; RMSNorm saves the
    same input as LayerNorm, and one statistic per token instead of two, which is negligible)
    + QKV and MLP inputs (2sbh each) + the two dropout masks (sbh each) = 10sbh; split over t =
    Q (2sbh), K and V (2sb*kv each, kv = kv_heads x head_dim: grouped-query attention saves
    less), projection input (2sbh) and the MLP's (mlp_saved_per_token); scores = 5as^2b. With
    f = 4h and kv = h: 34sbh + 5as^2b, the paper's. A parallel-residual block (GPT-NeoX) feeds
    both norms the same tensor, saved once. Rotary embeddings add the rotated Q and K
    (2sbh + 2sb*kv, split): attention saves those while the unrotated projections stay alive.
    `tp` only sets how many KV heads a rank holds (kv_width_per_rank): the split term is
    returned times tp, so that dividing by tp gives one rank's share. `kernels` changes what
    is saved (Kernels: fused SwiGLU and RoPE, no dropout masks).
    """
    s, b, h, a = seq_len, micro_batch, cfg.d_model, cfg.n_head
    kv = kv_width_per_rank(cfg, tp)
    layer_norm_inputs = 1 if cfg.parallel_residual else 2
    masks = 1 + 1 if kernels.dropout else 0
    replicated = (2 * layer_norm_inputs + 2 + 2 + masks) * s * b * h
    fused = kernels.fused_mlp
    rotated_qk = 2 * s * b * (h + kv) if cfg.position == "rotary" and not fused else 0
    split = (4 * s * b * h + 4 * s * b * kv + s * b * mlp_saved_per_token(cfg, fused)
             + rotated_qk)
    scores = 5 * a * s * s * b
    return float(replicated), float(split), float(scores)


def activation_bytes_per_layer(cfg: ModelConfig, seq_len: int, micro_batch: int,
                               bytes_per_value: int = 2, tp: int = 1, sp: bool = False,
                               recompute: str = "none", fused_attention: bool = False,
                               cp: int = 1, kernels: Kernels = EAGER) -> float:
    """Activations one transformer layer keeps for backward (Korthikanti et al. 2022, sec. 4-5).

    The paper's constants assume 16-bit values; other widths scale them. Tensor parallelism
    splits the `split` and `scores` terms of layer_activation_terms over tp, sequence
    parallelism also the replicated one. Selective recompute drops the scores; so does a fused
    attention kernel (flash or memory-efficient SDPA), which never stores them. Full recompute
    keeps only the layer's input (2sbh, split over tp under sequence parallelism). Context
    parallelism (cp) gives each rank s/cp of every sequence: every term, the scores' rows too,
    divides by cp.
    """
    if recompute not in RECOMPUTE_KINDS:
        raise ValueError(f"recompute must be one of {RECOMPUTE_KINDS}, got {recompute!r}")
    scale = bytes_per_value / 2 / cp
    replicated_div = tp if sp else 1
    if recompute == "full":
        return 2 * seq_len * micro_batch * cfg.d_model * scale / replicated_div
    if recompute == "selective" and kernels.selective == "every_other_mm":
        block_input, split = selective_op_terms(cfg, seq_len * micro_batch)
        return (block_input / replicated_div + split / tp) * scale
    replicated, split, scores = layer_activation_terms(cfg, seq_len, micro_batch, tp,
                                                       kernels)
    kept = replicated / replicated_div + split / tp
    if cfg.n_experts:
        kept += moe_activation_delta(cfg, seq_len * micro_batch, tp, kernels.fused_mlp, sp)
    if recompute == "none" and not fused_attention:
        kept += scores / tp
    gathered = 0.0  # the rest of the sequence's K and V, beside this rank's s/cp
    if kernels.cp_gathered:
        gathered = cp_gathered_kv_bytes(cfg, seq_len, micro_batch, tp, cp) * bytes_per_value / 2
    return kept * scale + gathered


def cp_gathered_kv_bytes(cfg: ModelConfig, seq_len: int, micro_batch: int, tp: int,
                         cp: int) -> float:
    """16-bit bytes of the other cp ranks' keys and values a layer keeps when they are
    all-gathered and saved for the backward: 2 x 2 x s x (1 - 1/cp) x b x kv width / tp (zero
    without cp); full recompute gathers them again and keeps none."""
    return 4.0 * seq_len * (1 - 1 / cp) * micro_batch * kv_width_per_rank(cfg, tp) / tp


def selective_op_terms(cfg: ModelConfig, tokens: int) -> tuple[float, float]:
    """(block input, split part): 16-bit bytes a dense block keeps under torchtitan's op-level
    selective recompute: its input (the checkpoint's), the outputs of the 1st, 3rd, ... forward
    matmul (flops.forward_matmuls) and the attention output (SDPA is saved; its per-head
    log-sum-exp is negligible); every other op is rerun in backward."""
    saved = sum(out for i, (_, out) in enumerate(forward_matmuls(cfg)) if i % 2 == 0)
    return 2.0 * tokens * cfg.d_model, 2.0 * tokens * (saved + cfg.d_model)


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


# --- Model states under ZeRO, pipeline in-flight activations, buffers (the planner's memory) ---

# Optimizer bytes per parameter beyond the weights and gradients: fp32 moments (Adam: m and v;
# SGD: momentum) plus an fp32 master copy when the weights are narrower than fp32.
OPTIMIZER_MOMENTS = {"adam": 2, "sgd": 1}
WORKSPACE_BYTES = 1 * GB  # runtime context, GEMM workspaces, collective buffers: an assumption
# A CPU process has no device context to pay for, and its measured memory is malloc's bytes in
# use (bench/memory.py), not RSS with the freed blocks glibc keeps: beyond the tensors it counts
# only MKL's GEMM packing buffers, which MKL's memory manager allocates on a process's first GEMMs
# and keeps (18 MiB for gpt2-tiny's head, measured; 0 with MKL_DISABLE_FAST_MM), so only the
# first cell of a process pays them. Counted as none: the quick study's cells then measure within
# 10% of the estimate, first cells included (benchmarks/cpu_memory_estimate.py, docs/metrics.md).
CPU_WORKSPACE_BYTES = 0
USABLE_FRACTION = 0.92  # the allocator's fragmentation and reserve leave ~8% unusable: assumed


@dataclass(frozen=True)
class ModelStateBytes:
    """Weights, gradients and optimizer state one rank holds, in bytes."""

    params: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        """All model states."""
        return self.params + self.grads + self.optimizer


def optimizer_bytes_per_param(dtype: str, optimizer: str = "adam") -> int:
    """K of the ZeRO paper: 12 for mixed-precision Adam (fp32 copy, m, v), 8 for fp32 Adam;
    FP8 training keeps the same fp32 master copy and moments as BF16 (precision.py)."""
    return 4 * OPTIMIZER_MOMENTS[optimizer] + training_widths(dtype).master


def model_state_bytes(n_params: float, dp: int = 1, zero: int = 0, dtype: str = "bf16",
                      optimizer: str = "adam", gemm_params: float = 0.0) -> ModelStateBytes:
    """ZeRO sec. 3.1: stage 1 shards optimizer state over dp, 2 also gradients, 3 also weights.

    Widths from precision.training_widths: under fp8 the weights and gradients stay BF16 and
    each block GEMM weight (`gemm_params` of them) adds its 1-byte FP8 copy, counted with the
    weights.
    """
    if zero not in ZERO_STAGES:
        raise ValueError(f"zero must be one of {ZERO_STAGES}, got {zero!r}")
    widths = training_widths(dtype)
    params = widths.weights * n_params + widths.fp8_weight_copy * gemm_params
    grads = widths.grads * n_params
    opt = optimizer_bytes_per_param(dtype, optimizer) * n_params
    return ModelStateBytes(params / dp if zero >= 3 else params,
                           grads / dp if zero >= 2 else grads,
                           opt / dp if zero >= 1 else opt)


def stage_params(cfg: ModelConfig, tp: int, pp: int, stage: str,
                 vocab_parallel: bool = True, layers: float | None = None) -> float:
    """Parameters on one rank of the "first", a "middle" or the "last" pipeline stage.

    Blocks split over stages (`layers` of them on this stage, else L/pp) and over tensor ranks;
    the token embedding and the output head are vocabulary-parallel (split over tp, as Megatron
    does) unless vocab_parallel=False (accelbench's own tensor parallel replicates them);
    learned positions are replicated. A tied head lives on both end stages when pp > 1
    (Megatron keeps a copy there), once when pp == 1.
    """
    h = cfg.d_model
    vocab_tp = tp if vocab_parallel else 1
    blocks = (cfg.n_layer / pp if layers is None else layers) * block_sizes(cfg)[0] / tp
    embed = cfg.padded_vocab * h / vocab_tp + (cfg.n_positions * h if cfg.position == "learned"
                                             else 0)
    norm = cfg.norm_params  # the final norm, on the last stage
    head = cfg.padded_vocab * h / vocab_tp + norm
    if pp == 1:
        return blocks + embed + (0 if cfg.tie_embeddings else head - norm) + norm
    return blocks + {"first": embed, "last": head}.get(stage, 0.0)


def stage_state_bytes(cfg: ModelConfig, layout: Layout, stage: str, layers: float, dtype: str,
                      optimizer: str, gemm_params: float = 0.0,
                      vocab_parallel: bool = True) -> ModelStateBytes:
    """Model states one rank of a stage holds: ZeRO shards dense state over dp x cp and, in a
    mixture of experts, the rank's E / ep experts' state over the dp x cp / ep ranks that hold
    the same experts (moe_cost.stage_split)."""
    params = stage_params(cfg, layout.tp, layout.pp, stage, vocab_parallel, layers)
    group = layout.dp * layout.cp
    if not cfg.n_experts:
        return model_state_bytes(params, group, layout.zero, dtype, optimizer, gemm_params)
    dense, expert = stage_split(cfg, params, layout.tp, layout.ep, layers)
    d = model_state_bytes(dense, group, layout.zero, dtype, optimizer, gemm_params)
    e = model_state_bytes(expert, group // layout.ep, layout.zero, dtype, optimizer)
    return ModelStateBytes(d.params + e.params, d.grads + e.grads, d.optimizer + e.optimizer)


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
