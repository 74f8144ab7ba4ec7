"""Megatron's ideal bytes a rank sends per step (the planner's formulas), recorded beside ours."""

from __future__ import annotations

from accelbench.analytics.comm import (
    cp_bytes_per_layer,
    dp_bytes_per_rank,
    pp_message_bytes,
    pp_sends_per_microbatch,
    tp_bytes_per_layer,
)
from accelbench.analytics.moe_cost import all_to_all_bytes_per_layer, moe_tokens
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.parallel.rank_params import rank_layers, rank_moe_layers


def ideal_comm_bytes_per_step(cfg: ModelConfig, layout: Layout, seq_len: int, micro_batch: int,
                        n_micro: int, dtype: str, grad_bytes_per_replica: float,
                        recompute: str = "none",
                        expert_grad_bytes_per_replica: float = 0.0) -> dict[str, float]:
    """Megatron's ideal bytes one rank sends per optimizer step, by kind (the planner's
    accelbench.analytics.comm formulas), recorded beside what this implementation sends.

    grad_bytes_per_replica: gradient bytes of this rank's model shard before any ZeRO split
    (what DDP all-reduces or FSDP reduce-scatters); expert_grad_bytes_per_replica: under ep
    the routed experts' part, reduced over the dp / ep ranks holding the same experts (as the
    planner's steptime does). Pipeline sends are those of a middle stage:
    whole b*s*h activations between stages, or 1/tp of them under sequence parallelism (each
    tp rank sends its sequence shard). Expert parallelism: the planner's all-to-all bytes
    (moe_cost.all_to_all_bytes_per_layer, uniform routing) of the busiest rank's MoE layers.
    """
    layers_per_rank = max(rank_layers(cfg, layout, r) for r in range(layout.pp))  # uneven too
    local_seq = seq_len // layout.cp  # a cp rank's tokens
    tp_bytes = (tp_bytes_per_layer(cfg, local_seq, micro_batch, dtype, layout.tp, recompute)
                * layers_per_rank * n_micro if layout.tp > 1 else 0.0)
    message_split = layout.tp if layout.sp else 1
    pp_bytes = (pp_message_bytes(cfg, local_seq, micro_batch, dtype, message_split)
                * pp_sends_per_microbatch(layout.vp) * n_micro if layout.pp > 1 else 0.0)
    grad_ranks = layout.dp * layout.cp  # cp ranks hold the same weights (Megatron too)
    dp_bytes = (dp_bytes_per_rank(grad_bytes_per_replica, grad_ranks, layout.zero, n_micro)
                if grad_ranks > 1 else 0.0)
    edp = layout.dp // layout.ep
    if expert_grad_bytes_per_replica and edp > 1:
        dp_bytes += dp_bytes_per_rank(expert_grad_bytes_per_replica, edp, layout.zero, n_micro)
    ep_bytes = _ideal_ep_bytes(cfg, layout, seq_len * micro_batch, n_micro, dtype, recompute)
    cp_bytes = (cp_bytes_per_layer(cfg, seq_len, micro_batch, dtype, layout.tp, layout.cp,
                                   recompute) * layers_per_rank * n_micro)
    return {"tp_bytes_per_step": tp_bytes, "pp_bytes_per_step": pp_bytes,
            "dp_bytes_per_step": dp_bytes, "ep_bytes_per_step": ep_bytes,
            "cp_bytes_per_step": cp_bytes,
            "comm_bytes_per_step": tp_bytes + pp_bytes + dp_bytes + ep_bytes + cp_bytes}


def _ideal_ep_bytes(cfg: ModelConfig, layout: Layout, tokens: int, n_micro: int, dtype: str,
                    recompute: str) -> float:
    """The planner's all-to-all bytes per step (moe_cost.all_to_all_bytes_per_layer: uniform
    routing, the compute dtype) of the pipeline rank with the most MoE layers."""
    if layout.ep == 1:
        return 0.0
    n_moe = max(len(rank_moe_layers(cfg, layout, r)) for r in range(layout.pp))
    per_layer = all_to_all_bytes_per_layer(cfg, moe_tokens(tokens, layout.tp, layout.sp),
                                           layout.ep, dtype, recompute)
    return per_layer * n_moe * n_micro
