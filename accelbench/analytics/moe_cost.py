"""What a mixture of experts adds to the planner's dense layer: expert state split over ep and
ZeRO, the routed tokens' activations, the experts' GEMMs at their real shapes and the
all-to-all token exchange; pure arithmetic, no torch.

Conventions (the runtime's, accelbench/parallel/expert.py): ep is carved out of dp; each MoE
layer's E routed experts are split over the ep ranks (E / ep whole experts each) and
replicated over the dp / ep expert-data-parallel ranks, over which ZeRO shards their state;
dense weights (attention, norms, router, shared experts) are sharded over dp as before. An
MoE layer stays whole on every tensor rank (no expert tensor parallelism). Routing is taken
as uniform: each expert gets tokens x k / E assignments (load imbalance is not modelled).
With a capacity factor cf > 0 every expert is padded to ceil(cf x T x k / E) assignments.
The per-layer figures are averaged over the layers (moe_layer_count / n_layer of them MoE).
"""

from __future__ import annotations

import math
from functools import lru_cache

from accelbench.analytics.params import expert_matmul_params, mlp_bias_params, router_params
from accelbench.analytics.precision import training_widths
from accelbench.config.model import ModelConfig, moe_layer_count

# All-to-alls per MoE layer per micro-batch: dispatch and combine in the forward, their
# gradients in the backward; full recompute reruns the forward's two.
A2A_FORWARD, A2A_BACKWARD = 2, 2


@lru_cache(maxsize=256)
def moe_fraction(cfg: ModelConfig) -> float:
    """The share of the layers that are MoE (every per-layer MoE term is scaled by it)."""
    return moe_layer_count(cfg) / cfg.n_layer if cfg.n_experts else 0.0


def routed_assignments(cfg: ModelConfig, tokens: int) -> float:
    """(token, expert) pairs the routed experts process for `tokens` tokens of one rank:
    tokens x k dropless, or E x ceil(cf x tokens x k / E) padded to capacity."""
    if cfg.capacity_factor > 0:
        per_expert = math.ceil(cfg.capacity_factor * tokens * cfg.moe_top_k / cfg.n_experts)
        return float(cfg.n_experts * per_expert)
    return float(tokens * cfg.moe_top_k)


def all_to_all_count(recompute: str) -> int:
    """All-to-alls per MoE layer and micro-batch (A2A_FORWARD/BACKWARD, + the rerun)."""
    rerun = A2A_FORWARD if recompute == "full" else 0
    return A2A_FORWARD + A2A_BACKWARD + rerun


def all_to_all_bytes_per_layer(cfg: ModelConfig, tokens: int, ep: int, dtype: str,
                               recompute: str = "none") -> float:
    """Bytes one rank sends per MoE layer and micro-batch: each all-to-all moves its routed
    assignments' hidden vectors, (ep - 1) / ep of them to other ranks."""
    if ep == 1:
        return 0.0
    one = routed_assignments(cfg, tokens) * cfg.d_model * training_widths(dtype).comm
    return all_to_all_count(recompute) * one * (ep - 1) / ep


def expert_params(cfg: ModelConfig) -> int:
    """Parameters of one routed expert (weights and biases)."""
    return expert_matmul_params(cfg) + mlp_bias_params(cfg, cfg.expert_ffn_dim)


def dense_mlp_params(cfg: ModelConfig) -> int:
    """Parameters of the dense MLP an MoE layer replaces (what block_params counts)."""
    return (3 if cfg.gated_mlp else 2) * cfg.d_model * cfg.ffn_dim + mlp_bias_params(
        cfg, cfg.ffn_dim)


def shared_params(cfg: ModelConfig) -> int:
    """Router, shared-expert gate and shared experts of one MoE layer (whole on every rank)."""
    shared = 0
    if cfg.n_shared_experts:
        shared = cfg.n_shared_experts * expert_matmul_params(cfg) + mlp_bias_params(
            cfg, cfg.n_shared_experts * cfg.expert_ffn_dim)
    return router_params(cfg) + shared


def stage_split(cfg: ModelConfig, dense_stage_params: float, tp: int, ep: int,
                layers: float) -> tuple[float, float]:
    """(dense, expert) parameters one rank of a stage of `layers` layers holds, from what the
    stage would hold were every layer dense: each MoE layer's dense MLP (split over tp) gives
    way to its router and shared experts (whole) and E / ep routed experts."""
    moe_layers = layers * moe_fraction(cfg)
    dense = dense_stage_params + moe_layers * (shared_params(cfg) - dense_mlp_params(cfg) / tp)
    return dense, moe_layers * cfg.n_experts / ep * expert_params(cfg)
