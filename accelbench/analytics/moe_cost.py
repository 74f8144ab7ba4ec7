"""What a mixture of experts adds to the planner's dense layer: expert state split over ep and
ZeRO, the routed tokens' activations, the experts' GEMMs at their real shapes and the
all-to-all token exchange; pure arithmetic, no torch.

Conventions (the runtime's, accelbench/parallel/expert.py): ep is carved out of dp; each MoE
layer's E routed experts are split over the ep ranks (E / ep whole experts each) and
replicated over the dp / ep expert-data-parallel ranks, over which ZeRO shards their state;
dense weights (attention, norms, router, shared experts) are sharded over dp as before. An
MoE layer stays whole on every tensor rank (no expert tensor parallelism). Routing is uniform
on average (each expert gets tokens x k / E assignments); the busiest expert-parallel rank,
which the step waits for, gets a stated factor more (busiest_rank_factor: 1.0 = balanced).
With a capacity factor cf > 0 every expert is padded to ceil(cf x T x k / E) assignments.
The per-layer figures are averaged over the layers (moe_layer_count / n_layer of them MoE).
"""

from __future__ import annotations

import math
from functools import lru_cache

from accelbench.analytics.params import expert_matmul_params, mlp_bias_params, router_params
from accelbench.analytics.training_widths import training_widths
from accelbench.config.model import ModelConfig, moe_layer_count

# All-to-alls per MoE layer per micro-batch: dispatch and combine in the forward, their
# gradients in the backward; full recompute reruns the forward's two.
A2A_FORWARD, A2A_BACKWARD = 2, 2


@lru_cache(maxsize=256)
def moe_fraction(cfg: ModelConfig) -> float:
    """The share of the layers that are MoE (every per-layer MoE term is scaled by it)."""
    return moe_layer_count(cfg) / cfg.n_layer if cfg.n_experts else 0.0


def moe_tokens(tokens: int, tp: int, sp: bool) -> int:
    """Tokens an MoE layer routes on one rank of `tokens` per tensor-parallel group: its own
    sequence shard under sequence parallelism (the runtime's and Megatron-Core's), all of them
    on every tensor rank without."""
    return tokens // tp if sp else tokens


def routed_assignments(cfg: ModelConfig, tokens: int) -> float:
    """(token, expert) pairs the routed experts process for `tokens` tokens of one rank:
    tokens x k dropless, or E x ceil(cf x tokens x k / E) padded to capacity."""
    if cfg.capacity_factor > 0:
        per_expert = math.ceil(cfg.capacity_factor * tokens * cfg.moe_top_k / cfg.n_experts)
        return float(cfg.n_experts * per_expert)
    return float(tokens * cfg.moe_top_k)


def busiest_rank_factor(cfg: ModelConfig, ep: int, imbalance: float) -> float:
    """The busiest ep rank's routed assignments over the mean rank's, from the stated expert-load
    imbalance (the busiest expert's over the mean, as the runtime records moe_load_imbalance:
    an upper bound of the rank's, equal at one expert a rank). 1 on one rank (it holds every
    assignment) and under a capacity factor (padding and drops bound each expert's rows);
    never above ep (a rank cannot receive more than every rank's assignments)."""
    if ep == 1 or cfg.capacity_factor > 0:
        return 1.0
    return min(float(imbalance), float(ep))


def all_to_all_count(recompute: str) -> int:
    """All-to-alls per MoE layer and micro-batch (A2A_FORWARD/BACKWARD, + the rerun)."""
    rerun = A2A_FORWARD if recompute == "full" else 0
    return A2A_FORWARD + A2A_BACKWARD + rerun


def all_to_all_bytes_per_layer(cfg: ModelConfig, tokens: int, ep: int, dtype: str,
                               recompute: str = "none", imbalance: float = 1.0) -> float:
    """Bytes the busiest rank moves per MoE layer and micro-batch: each all-to-all carries its
    routed assignments' hidden vectors (busiest_rank_factor times the mean rank's: it receives
    them in the dispatch, sends them back in the combine), (ep - 1) / ep of them remote."""
    if ep == 1:
        return 0.0
    one = routed_assignments(cfg, tokens) * cfg.d_model * training_widths(dtype).comm
    factor = busiest_rank_factor(cfg, ep, imbalance)
    return all_to_all_count(recompute) * one * factor * (ep - 1) / ep


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
