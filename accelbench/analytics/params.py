"""Parameter counts of a GPT configuration, by part, from its shape alone.

Every family of the one decoder: GPT-2/GPT-3 (biases, LayerNorm, GELU), GPT-NeoX, and
Llama-style models (grouped-query attention: k and v are kv_heads x head_dim wide; SwiGLU: three
d_model x ffn_dim matrices; RMSNorm: a weight only; no biases, or q/k/v biases only as Qwen2).
"""

from __future__ import annotations

from accelbench.config.model import ModelConfig


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
    mlp_in = 2 * cfg.ffn_dim if cfg.gated_mlp else cfg.ffn_dim
    return qkv + cfg.d_model + mlp_in + cfg.d_model


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
    """All parameters, a tied embedding counted once (as the public GPT-2 checkpoints count)."""
    return cfg.n_layer * block_params(cfg) + embedding_params(cfg) + cfg.norm_params


def matmul_params(cfg: ModelConfig) -> int:
    """N of PaLM's 6N: the weights that take part in matrix multiplies (blocks and output head).

    Position embeddings, biases and norms cost no matmul FLOPs and are left out, which makes the
    count equal to an operator-level count (torch's FlopCounterMode) rather than an approximation.
    """
    return cfg.n_layer * block_matmul_params(cfg) + cfg.vocab_size * cfg.d_model
