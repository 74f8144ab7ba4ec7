"""What a layer keeps for backward (Korthikanti et al. 2022) and what kernels change; no torch."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.flops import forward_matmuls
from accelbench.analytics.moe_cost import moe_fraction, moe_tokens, routed_assignments
from accelbench.config.model import ModelConfig
from accelbench.config.vocab import RECOMPUTE_KINDS


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
# analytics/measured_step_runs.py): SDPA attention, eager GELU/SwiGLU and loss, keys and values
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
