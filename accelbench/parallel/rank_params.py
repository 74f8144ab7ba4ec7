"""The layers and parameters one rank holds under a layout, before any ZeRO split."""

from __future__ import annotations

from accelbench.analytics.moe_cost import dense_mlp_params, expert_params, shared_params
from accelbench.analytics.params import block_params
from accelbench.config.layer_split import rank_layer_counts, stage_layer_counts
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig, is_moe_layer


def kv_share(kv_heads: int, tp: int) -> int:
    """Tensor ranks that share one key/value head: 1 when tp divides kv_heads, else tp /
    kv_heads (the layout's "kv heads" rule makes one of the two divide)."""
    return 1 if kv_heads % tp == 0 else tp // kv_heads


def rank_layers(cfg: ModelConfig, layout: Layout, pp_rank: int = 0) -> int:
    """Blocks one pipeline rank holds: its stages' layer counts (uneven stages included)."""
    counts = rank_layer_counts(layout, cfg.n_layer)
    if counts is None:
        raise ValueError(f"layout {layout.label()} does not split {cfg.n_layer} layers")
    return counts[pp_rank]


def rank_moe_layers(cfg: ModelConfig, layout: Layout, pp_rank: int = 0) -> list[int]:
    """Indices of the MoE blocks a pipeline rank holds (stage s is chunk s // pp of rank
    s % pp, its layers following the earlier stages')."""
    counts = stage_layer_counts(layout, cfg.n_layer)
    if counts is None:
        raise ValueError(f"layout {layout.label()} does not split {cfg.n_layer} layers")
    starts = [sum(counts[:s]) for s in range(len(counts))]
    return [layer for s in range(pp_rank, len(counts), layout.pp)
            for layer in range(starts[s], starts[s] + counts[s]) if is_moe_layer(cfg, layer)]


def _dense_block_local(cfg: ModelConfig, tp: int) -> float:
    """One dense block on one tensor rank: the TP-split matrices and column biases over tp;
    two norms and the two row-parallel output biases (if any) whole; the fused QKV rows
    (shared key/value heads too, each rank a part) split evenly over tp."""
    whole = 2 * cfg.norm_params + (2 * cfg.d_model if cfg.bias else 0)
    return (block_params(cfg) - whole) / tp + whole


def _moe_block_local(cfg: ModelConfig, layout: Layout) -> tuple[float, float]:
    """(dense, expert) parameters of one MoE block on one rank: the dense block without its
    TP-split MLP (its output bias whole), plus router and shared experts whole on every tensor
    rank (parallel/tp.py keeps an MoE layer whole), and E / ep routed experts."""
    row_bias = cfg.d_model if cfg.bias else 0
    mlp_local = (dense_mlp_params(cfg) - row_bias) / layout.tp + row_bias
    dense = _dense_block_local(cfg, layout.tp) - mlp_local + shared_params(cfg)
    return dense, cfg.n_experts // layout.ep * expert_params(cfg)


def local_param_split(cfg: ModelConfig, layout: Layout, pp_rank: int = 0) -> tuple[float, float]:
    """(dense, expert) parameters one rank holds before any ZeRO split: its blocks (dense ones
    split over tp; MoE ones as _moe_block_local); embeddings (first stage), final norm and head
    (last stage) whole on every tensor rank; under pp a tied head is a copy. Expert: this rank's
    routed experts, whose gradients the runtime reduces over the expert-data-parallel group."""
    h = cfg.d_model
    n_moe = len(rank_moe_layers(cfg, layout, pp_rank)) if cfg.n_experts else 0
    dense = (rank_layers(cfg, layout, pp_rank) - n_moe) * _dense_block_local(cfg, layout.tp)
    expert = 0.0
    if n_moe:
        moe_dense, moe_expert = _moe_block_local(cfg, layout)
        dense, expert = dense + n_moe * moe_dense, n_moe * moe_expert
    if pp_rank == 0:
        dense += cfg.padded_vocab * h + (cfg.n_positions * h if cfg.position == "learned" else 0)
    if pp_rank == layout.pp - 1:
        dense += cfg.norm_params + (cfg.padded_vocab * h if layout.pp > 1 or not cfg.tie_embeddings
                                    else 0)
    return dense, expert


def local_param_count(cfg: ModelConfig, layout: Layout, pp_rank: int = 0) -> float:
    """Parameters one rank holds before any ZeRO split (local_param_split's two parts)."""
    return sum(local_param_split(cfg, layout, pp_rank))
