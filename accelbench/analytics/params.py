"""Parameter counts of a GPT configuration, by part, from its shape alone."""

from __future__ import annotations

from accelbench.config.model import ModelConfig


def block_params(cfg: ModelConfig) -> int:
    """Parameters of one transformer block: attention, MLP (weights and biases) and two norms."""
    h, f = cfg.d_model, cfg.ffn_dim
    attention = 3 * h * h + 3 * h + h * h + h
    mlp = h * f + f + f * h + h
    norms = 2 * 2 * h
    return attention + mlp + norms


def block_matmul_params(cfg: ModelConfig) -> int:
    """Weights of one block that enter matrix multiplies (what costs 2 FLOPs per token each)."""
    h, f = cfg.d_model, cfg.ffn_dim
    return 4 * h * h + 2 * h * f


def embedding_params(cfg: ModelConfig) -> int:
    """Token embedding, learned positions (if any) and an untied output head (if any)."""
    token = cfg.vocab_size * cfg.d_model
    positions = cfg.n_positions * cfg.d_model if cfg.position == "learned" else 0
    head = 0 if cfg.tie_embeddings else cfg.vocab_size * cfg.d_model
    return token + positions + head


def total_params(cfg: ModelConfig) -> int:
    """All parameters, a tied embedding counted once (as the public GPT-2 checkpoints count)."""
    final_norm = 2 * cfg.d_model
    return cfg.n_layer * block_params(cfg) + embedding_params(cfg) + final_norm


def matmul_params(cfg: ModelConfig) -> int:
    """N of PaLM's 6N: the weights that take part in matrix multiplies (blocks and output head).

    Position embeddings, biases and norms cost no matmul FLOPs and are left out, which makes the
    count equal to an operator-level count (torch's FlopCounterMode) rather than an approximation.
    """
    return cfg.n_layer * block_matmul_params(cfg) + cfg.vocab_size * cfg.d_model
