"""FLOPs of a GPT decoder: PaLM appendix B (6N + 12*L*H*Q*T per token), split by pass.

Counting convention (the same as torch.utils.flop_counter.FlopCounterMode): a multiply-add is 2
FLOPs; matrix multiplies only (norms, biases, softmax and activations are not counted); attention
scores are counted over the full T x T matrix, not halved for causality; backward costs twice the
forward (gradient of the input plus gradient of the weight).

Mixture of experts: model FLOPs count what each token is specified to use, the router (and
Qwen-MoE's shared gate), the shared experts and k routed experts (N is then the active matmul
weights, analytics/params.py matmul_params); tokens dropped over capacity are still counted
(MFU's convention), and what the experts did not run for them is `dropped_flops`.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.params import (
    block_matmul_params,
    expert_matmul_params,
    layer_matmul_params,
    matmul_params,
)
from accelbench.config.model import ModelConfig, is_moe_layer
from accelbench.config.vocab import RECOMPUTE_KINDS

FORMULA = "PaLM App. B: 6N + 12*L*H*Q*T per token (N = matmul weights; full T x T attention)"


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one pass pair, kept apart because the study times them apart."""

    forward: float
    backward: float

    @property
    def total(self) -> float:
        """Forward plus backward."""
        return self.forward + self.backward

    def scaled(self, factor: float) -> FlopCount:
        """The same count for `factor` times the tokens."""
        return FlopCount(self.forward * factor, self.backward * factor)


def attention_core_forward_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """QK^T and AV of one layer for one token: 2 matmuls of 2*T*d_model FLOPs each (every query
    head attends, so grouped-query attention, which shares key/value heads, costs the same)."""
    return 4.0 * seq_len * cfg.d_model


def block_forward_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """One transformer block's forward FLOPs per token: weights plus attention core."""
    return 2.0 * block_matmul_params(cfg) + attention_core_forward_per_token(cfg, seq_len)


def block_flops(cfg: ModelConfig, seq_len: int, batch: int, layer: int = 0) -> FlopCount:
    """Block `layer` (the block benchmark's Block(cfg) is layer 0), forward and backward, for a
    batch of sequences; an MoE block counts router, shared and k routed experts."""
    forward = (2.0 * layer_matmul_params(cfg, layer)
               + attention_core_forward_per_token(cfg, seq_len)) * seq_len * batch
    return FlopCount(forward, 2.0 * forward)


def model_forward_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """The whole model's forward per token: 2N + 4*L*H*Q*T."""
    attention = cfg.n_layer * attention_core_forward_per_token(cfg, seq_len)
    return 2.0 * matmul_params(cfg) + attention


def model_flops_per_token(cfg: ModelConfig, seq_len: int) -> FlopCount:
    """Training model FLOPs per token, split by pass (sum: 6N + 12*L*H*Q*T)."""
    forward = model_forward_per_token(cfg, seq_len)
    return FlopCount(forward, 2.0 * forward)


def model_flops_per_step(cfg: ModelConfig, seq_len: int, tokens_per_step: int) -> FlopCount:
    """Training model FLOPs of one optimizer step of `tokens_per_step` tokens."""
    return model_flops_per_token(cfg, seq_len).scaled(tokens_per_step)


# What "selective" recompute reruns, by framework: the attention core (Korthikanti et al.
# 2022, Megatron-LM), or torchtitan's op-level policy, which saves the outputs of matmuls and
# attention but every second matmul of a block and reruns everything else.
SELECTIVE_POLICIES = ("attention", "every_other_mm")


def forward_matmuls(cfg: ModelConfig) -> tuple[tuple[int, int], ...]:
    """(weights, output values per token) of a dense block's forward matmuls in the order an
    unfused block runs them: query, key, value, attention output, then the MLP (gate, up and
    down with SwiGLU; fc and proj otherwise)."""
    h, f = cfg.d_model, cfg.ffn_dim
    kv = cfg.kv_heads * cfg.head_dim
    mlp = (((h * f, f), (h * f, f), (f * h, h)) if cfg.activation == "swiglu"
           else ((h * f, f), (f * h, h)))
    return ((h * h, h), (h * kv, kv), (h * kv, kv), (h * h, h)) + mlp


def every_other_mm_rerun_params(cfg: ModelConfig) -> int:
    """Weights of the matmuls torchtitan's op-level policy reruns: the 2nd, 4th, ... of a block
    (its count restarts at every checkpointed block)."""
    return sum(weights for i, (weights, _) in enumerate(forward_matmuls(cfg)) if i % 2)


def recompute_flops_per_token(cfg: ModelConfig, seq_len: int, recompute: str,
                              early_stop: bool = False, selective: str = "attention") -> float:
    """Forward FLOPs that activation recompute reruns per token (hardware, not model, FLOPs).

    full: every block's forward again; selective: the attention core (Korthikanti et al. 2022),
    or with selective="every_other_mm" (torchtitan) every second matmul of each block.
    early_stop: torch's non-reentrant checkpoint (our measured runs) stops rerunning once every
    saved tensor is back, so each block's last matmul (the MLP's output projection, whose
    output nothing saves) is not rerun; Megatron's full recompute reruns the whole block.
    """
    if recompute == "none":
        return 0.0
    if recompute == "selective" and selective == "every_other_mm":
        return cfg.n_layer * 2.0 * every_other_mm_rerun_params(cfg)
    if recompute == "full":
        if cfg.n_experts:
            return sum(_rerun_layer(cfg, seq_len, i, early_stop) for i in range(cfg.n_layer))
        skipped = 2.0 * cfg.ffn_dim * cfg.d_model if early_stop else 0.0
        return cfg.n_layer * (block_forward_per_token(cfg, seq_len) - skipped)
    if recompute == "selective":
        return cfg.n_layer * attention_core_forward_per_token(cfg, seq_len)
    raise ValueError(f"recompute must be one of {RECOMPUTE_KINDS}, got {recompute!r}")


def _rerun_layer(cfg: ModelConfig, seq_len: int, layer: int, early_stop: bool) -> float:
    """Forward FLOPs full recompute reruns for block `layer` of a mixture of experts: all of
    it (an expert's output is saved for its gate's gradient, so early stop skips nothing in an
    MoE block), or a dense block less its MLP output projection under early stop."""
    forward = (2.0 * layer_matmul_params(cfg, layer)
               + attention_core_forward_per_token(cfg, seq_len))
    if early_stop and not is_moe_layer(cfg, layer):
        forward -= 2.0 * cfg.ffn_dim * cfg.d_model
    return forward


def dropped_flops(cfg: ModelConfig, dropped_assignments: int) -> FlopCount:
    """Training FLOPs the routed experts did not run for `dropped_assignments` (token, expert)
    pairs over capacity: model FLOPs less these is what the experts executed."""
    forward = 2.0 * expert_matmul_params(cfg) * dropped_assignments
    return FlopCount(forward, 2.0 * forward)


def hardware_flops_per_token(cfg: ModelConfig, seq_len: int, recompute: str,
                             early_stop: bool = False, selective: str = "attention") -> float:
    """Training FLOPs the hardware executes per token: model FLOPs plus recompute."""
    model = model_flops_per_token(cfg, seq_len).total
    return model + recompute_flops_per_token(cfg, seq_len, recompute, early_stop, selective)


def sparse_matmul_params(cfg: ModelConfig) -> int:
    """Weights of the matrices weight sparsity masks: every block's qkv, attention output, MLP
    fc and MLP proj (models/weight_masks.py); embeddings and the head stay dense."""
    return cfg.n_layer * block_matmul_params(cfg)


def sparse_flops_per_token(cfg: ModelConfig, seq_len: int, level: float) -> FlopCount:
    """Effective training FLOPs per token of a model whose block matrices have `level` of their
    weights zero (any pattern: 2:4 is level 0.5): the dense count less the multiplies by zeros,
    6 x level x (masked weights). What a kernel that skips zeros would perform; masked dense
    still performs model_flops_per_token, and MFU is always that dense count."""
    forward = model_forward_per_token(cfg, seq_len) - 2.0 * level * sparse_matmul_params(cfg)
    return FlopCount(forward, 2.0 * forward)


def mask_bytes(cfg: ModelConfig) -> int:
    """Memory of the masks: one bool (1 byte) per masked weight, on the ranks that hold it."""
    return sparse_matmul_params(cfg)


def two_four_compressed_bytes(cfg: ModelConfig, bytes_per_value: int = 2) -> int:
    """The masked matrices compressed 2:4 (16-bit values, as torch's semi-structured kernels
    take them): the kept half of the values plus 2 bits of position per kept value."""
    n = sparse_matmul_params(cfg)
    return n // 2 * bytes_per_value + n // 8


def two_four_skipped_flops_per_token(cfg: ModelConfig, seq_len: int, recompute: str,
                                     early_stop: bool = False) -> float:
    """Multiply-adds a 2:4 kernel does not perform per token (2 FLOPs each): half of the
    masked matrices' forward GEMMs (recomputed ones included) and of their input-gradient
    GEMMs; weight gradients stay dense (models/semi_structured.py). Executed FLOPs are the
    hardware FLOPs less these; MFU stays the dense count."""
    p = sparse_matmul_params(cfg)
    recomputed = 0.0
    if recompute == "full":
        recomputed = 2.0 * p - (cfg.n_layer * 2.0 * cfg.ffn_dim * cfg.d_model if early_stop
                                else 0.0)
    return 0.5 * (2.0 * p + 2.0 * p + recomputed)
