"""Parameter counts of a GPT configuration, by part, from its shape alone.

Every family of the one decoder: GPT-2/GPT-3 (biases, LayerNorm, GELU), GPT-NeoX, and
Llama-style models (grouped-query attention: k and v are kv_heads x head_dim wide; SwiGLU: three
d_model x ffn_dim matrices; RMSNorm: a weight only; no biases, or q/k/v biases only as Qwen2).

Mixture of experts (models/moe.py): an MoE block's MLP is a router (d_model x E), E routed
experts and the shared experts (each an MLP of expert_ffn_dim, the shared ones fused into one of
n_shared x expert_ffn_dim) and Qwen-MoE's shared gate (d_model x 1). `total_params` counts every
expert; `active_params` and `matmul_params` count what one token uses: the router, the shared
experts and k routed experts. The block_* functions describe a dense block.
"""

from __future__ import annotations

from collections.abc import Callable

from accelbench.config.model import ModelConfig, is_moe_layer, moe_layer_count


def attention_matmul_params(cfg: ModelConfig) -> int:
    """Weights of one block's attention: the fused q, k, v projection and the output projection."""
    h = cfg.d_model
    return h * (h + 2 * cfg.kv_dim) + h * h


def mlp_matmul_params(cfg: ModelConfig) -> int:
    """Weights of one block's MLP: input and output matrices, plus the gate of SwiGLU."""
    matrices = 3 if cfg.gated_mlp else 2
    return matrices * cfg.d_model * cfg.ffn_dim


def block_bias_params(cfg: ModelConfig) -> int:
    """Biases of one block's linear layers (all of them, q/k/v only, or none)."""
    qkv = cfg.d_model + 2 * cfg.kv_dim
    if not cfg.bias:
        return qkv if cfg.qkv_bias else 0
    return qkv + cfg.d_model + mlp_bias_params(cfg, cfg.ffn_dim)


def mlp_bias_params(cfg: ModelConfig, ffn_dim: int) -> int:
    """Biases of one MLP of width ffn_dim: its input rows ([gate | up] for SwiGLU) and output."""
    if not cfg.bias:
        return 0
    return (2 * ffn_dim if cfg.gated_mlp else ffn_dim) + cfg.d_model


def expert_matmul_params(cfg: ModelConfig) -> int:
    """Weights of one expert's MLP (routed or, per shared expert, shared)."""
    return (3 if cfg.gated_mlp else 2) * cfg.d_model * cfg.expert_ffn_dim


def router_params(cfg: ModelConfig) -> int:
    """The router's d_model x E matrix, plus Qwen-MoE's shared-expert gate (d_model x 1); both
    are matmuls every token runs."""
    return cfg.d_model * cfg.n_experts + (cfg.d_model if cfg.moe_shared_gate else 0)


def moe_mlp_params(cfg: ModelConfig, experts: int) -> int:
    """One MoE MLP with `experts` routed experts counted (E for the total, k for one token's
    use): router, those experts and the shared experts, weights and biases."""
    routed = experts * (expert_matmul_params(cfg) + mlp_bias_params(cfg, cfg.expert_ffn_dim))
    shared_width = cfg.n_shared_experts * cfg.expert_ffn_dim
    shared = 0
    if cfg.n_shared_experts:
        shared = cfg.n_shared_experts * expert_matmul_params(cfg)
        shared += mlp_bias_params(cfg, shared_width)
    return router_params(cfg) + routed + shared


def moe_matmul_params(cfg: ModelConfig, experts: int) -> int:
    """The matmul weights of one MoE MLP with `experts` routed experts counted."""
    shared = cfg.n_shared_experts * expert_matmul_params(cfg)
    return router_params(cfg) + experts * expert_matmul_params(cfg) + shared


def layer_params(cfg: ModelConfig, layer: int, active: bool = False) -> int:
    """Parameters of block `layer`: a dense block, or one whose MLP is an MoE (active: the k
    experts one token visits instead of all E)."""
    if not is_moe_layer(cfg, layer):
        return block_params(cfg)
    dense_mlp = mlp_matmul_params(cfg) + mlp_bias_params(cfg, cfg.ffn_dim)
    experts = cfg.moe_top_k if active else cfg.n_experts
    return block_params(cfg) - dense_mlp + moe_mlp_params(cfg, experts)


def layer_matmul_params(cfg: ModelConfig, layer: int) -> int:
    """The matmul weights one token uses in block `layer` (2 forward FLOPs each)."""
    if not is_moe_layer(cfg, layer):
        return block_matmul_params(cfg)
    return attention_matmul_params(cfg) + moe_matmul_params(cfg, cfg.moe_top_k)


def block_params(cfg: ModelConfig) -> int:
    """Parameters of one transformer block: attention, MLP (weights and biases) and two norms."""
    return block_matmul_params(cfg) + block_bias_params(cfg) + 2 * cfg.norm_params


def tp_whole_block_params(cfg: ModelConfig) -> int:
    """Parameters of one block that tensor parallelism keeps whole on every rank: the two norms
    and the biases of the two row-parallel output projections (attention's and the MLP's)."""
    return 2 * cfg.norm_params + (2 * cfg.d_model if cfg.bias else 0)


def block_matmul_params(cfg: ModelConfig) -> int:
    """Weights of one block that enter matrix multiplies (what costs 2 FLOPs per token each)."""
    return attention_matmul_params(cfg) + mlp_matmul_params(cfg)


def embedding_params(cfg: ModelConfig) -> int:
    """Token embedding, learned positions (if any) and an untied output head (if any)."""
    token = cfg.vocab_size * cfg.d_model
    positions = cfg.n_positions * cfg.d_model if cfg.position == "learned" else 0
    head = 0 if cfg.tie_embeddings else cfg.vocab_size * cfg.d_model
    return token + positions + head


def total_params(cfg: ModelConfig) -> int:
    """All parameters, a tied embedding counted once (as the public GPT-2 checkpoints count);
    every expert of a mixture of experts."""
    return _blocks(cfg, layer_params) + embedding_params(cfg) + cfg.norm_params


def active_params(cfg: ModelConfig) -> int:
    """The parameters one token uses: total_params with each MoE layer's routed experts counted
    k times, not E (Mixtral 8x7B: 12.9B of 46.7B); a dense model's total."""
    blocks = _blocks(cfg, lambda c, i: layer_params(c, i, active=True))
    return blocks + embedding_params(cfg) + cfg.norm_params


def _blocks(cfg: ModelConfig, per_layer: Callable[[ModelConfig, int], int]) -> int:
    """A per-layer count summed over the blocks: the dense layers, then the MoE layers (cheap
    for the planner's search: two calls, not one per layer)."""
    if cfg.n_experts == 0:
        return cfg.n_layer * per_layer(cfg, 0)
    moe = moe_layer_count(cfg)
    dense_layer = next((i for i in range(cfg.n_layer) if not is_moe_layer(cfg, i)), None)
    moe_layer = next((i for i in range(cfg.n_layer) if is_moe_layer(cfg, i)), None)
    dense = (cfg.n_layer - moe) * per_layer(cfg, dense_layer) if dense_layer is not None else 0
    return dense + (moe * per_layer(cfg, moe_layer) if moe_layer is not None else 0)


def matmul_params(cfg: ModelConfig) -> int:
    """N of PaLM's 6N: the weights that take part in matrix multiplies (blocks and output head).

    Position embeddings, biases and norms cost no matmul FLOPs and are left out, which makes the
    count equal to an operator-level count (torch's FlopCounterMode) rather than an approximation.
    A mixture of experts counts the weights one token uses: router, shared and k routed experts.
    """
    return _blocks(cfg, layer_matmul_params) + cfg.vocab_size * cfg.d_model
