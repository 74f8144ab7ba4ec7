"""Expert parallelism: each MoE layer's experts split over the ep ranks of an ep group, tokens
sent to their experts' ranks and back with all-to-all (torch.distributed.all_to_all_single:
NCCL on GPUs, gloo on the CPU).

One dispatch, for the rows of the T tokens a rank routed (already sorted by expert, models/moe.py):

1. counts: each rank's per-expert row counts are exchanged first (one all-to-all of E / ep
   integers per peer), so every rank knows how many rows it will receive from each peer;
2. tokens: the rows go to the rank that holds their expert (all_to_all_single with those
   split sizes; uneven, and empty for a peer that sends nothing);
3. the local experts compute on the received rows, regrouped by expert;
4. combine: the outputs travel back by the reverse all-to-all and are gated and summed into
   their tokens by the MoE layer's combine.

The all-to-all is differentiable (its backward is the reverse all-to-all of the gradients), so
the expert weights' gradients gather every ep peer's tokens. The convention (Megatron-Core's):
ep ranks are carved out of the data-parallel ranks (config/layout.py); see expert_groups in
parallel/dist.py for the ep and expert-data-parallel groups and grad_sync.py for the reduction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from accelbench.config.layout import Layout
from accelbench.models.moe import MoE, moe_layers, set_dispatch
from accelbench.models.moe_routing import Experts, Routing, combine, permute
from accelbench.parallel.dist import ExpertGroups, expert_groups

if TYPE_CHECKING:
    from torch.distributed.fsdp import MixedPrecisionPolicy

EXPERT_SHARDS_ATTR = "accelbench_expert_shards"  # a parameter split over this many ep ranks


class _AllToAll(torch.autograd.Function):
    """all_to_all_single whose backward sends the gradients back the reverse way."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                group: dist.ProcessGroup) -> torch.Tensor:
        ctx.splits, ctx.group = (out_splits, in_splits), group
        return all_to_all_rows(x, out_splits, in_splits, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out_splits, in_splits = ctx.splits
        return all_to_all_rows(grad, in_splits, out_splits, ctx.group), None, None, None


def all_to_all_rows(x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                    group: dist.ProcessGroup) -> torch.Tensor:
    """Rows of x, in_splits[j] of them to peer j; returns out_splits[j] rows from each peer j."""
    out = x.new_empty((sum(out_splits), *x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
    return out


def exchange_counts(counts: torch.Tensor, ep: int, group: dist.ProcessGroup) -> torch.Tensor:
    """Per-expert row counts (E,) of this rank -> (ep, E / ep): row j holds what peer j sends
    to each of this rank's experts."""
    send = counts.reshape(ep, -1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv


def expert_order(recv_counts: torch.Tensor) -> torch.Tensor:
    """Received rows come by (peer, local expert); the permutation that groups them by local
    expert (peers in rank order within an expert)."""
    n_peers, n_local = recv_counts.shape
    local = torch.arange(n_local, device=recv_counts.device).repeat(n_peers)
    expert_of_row = torch.repeat_interleave(local, recv_counts.reshape(-1))
    return torch.argsort(expert_of_row, stable=True)


class ExpertParallelDispatch:
    """The MoE dispatch seam (models/moe.py's Dispatch) over one ep group."""

    def __init__(self, group: dist.ProcessGroup, ep: int) -> None:
        self.group, self.ep = group, ep

    def __call__(self, x: torch.Tensor, routing: Routing, experts: Experts) -> torch.Tensor:
        """Permute, send rows to their experts' ranks, compute, send back, combine."""
        counts = routing.tokens_per_expert.to(x.device)
        recv_counts = exchange_counts(counts, self.ep, self.group)
        send_splits = counts.reshape(self.ep, -1).sum(1).tolist()
        recv_splits = recv_counts.sum(1).tolist()
        rows = _AllToAll.apply(permute(x, routing), recv_splits, send_splits, self.group)
        order = expert_order(recv_counts)
        out = experts(rows.index_select(0, order), recv_counts.sum(0).tolist())
        back = out.index_select(0, torch.argsort(order))  # rows back in (peer, expert) order
        return combine(_AllToAll.apply(back, send_splits, recv_splits, self.group), routing)


def apply_expert_parallel(model: nn.Module, layout: Layout, groups: ExpertGroups) -> int:
    """Keep this rank's E / ep experts of every MoE layer, mark their parameters, and route
    through the ep group; returns the MoE layers changed."""
    layers = moe_layers(model)
    if layout.ep == 1:
        return len(layers)
    for moe in layers:
        n_local = moe.n_experts // layout.ep
        moe.experts.shard(groups.ep_rank * n_local, n_local)
        for p in moe.experts.parameters():
            setattr(p, EXPERT_SHARDS_ATTR, layout.ep)
    set_dispatch(model, ExpertParallelDispatch(groups.ep_group, layout.ep))
    return len(layers)


def place_experts(model: nn.Module, layout: Layout, mesh) -> ExpertGroups | None:
    """Expert parallelism of a layout with ep > 1: the groups made and the experts split;
    None (nothing done) at ep 1."""
    if layout.ep == 1 or mesh is None:
        return None
    groups = expert_groups(layout, mesh)
    apply_expert_parallel(model, layout, groups)
    return groups


def shard_experts(blocks: list[nn.Module], layout: Layout, groups: ExpertGroups,
                  device_type: str, tp_sum: Callable[[torch.Tensor], None] | None = None,
                  policy: MixedPrecisionPolicy | None = None) -> None:
    """ZeRO-2/3 under ep: each MoE layer's experts FSDP2-sharded over the expert-data-parallel
    group (before the blocks are, over dp); their reduce-scatter divided by dp, as the ep
    group's tokens are already summed into them (the rule of grad_sync.py). tp_sum (sequence
    parallelism): the all-reduce hook that sums the shard over the tp ranks' sequence shards.
    policy: FSDP2's mixed precision, the blocks' (parallel/apply.py fsdp_policy)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # parallel/dtensors.py

    mesh = DeviceMesh.from_group(groups.edp_group, device_type)
    for moe in (m for block in blocks for m in moe_layers(block)):
        fully_shard(moe.experts, mesh=mesh, reshard_after_forward=layout.zero == 3,
                    mp_policy=policy or MixedPrecisionPolicy())
        moe.experts.set_gradient_divide_factor(float(layout.dp))
        # a divide factor other than the group's size is NCCL's PREMUL_SUM, which gloo lacks:
        # a plain sum with the division beside it, on every backend. Not on a group of one,
        # where torch (2.13) would divide twice (its copy path and the post-division)
        if groups.edp_size > 1:
            moe.experts.set_force_sum_reduction_for_comms(True)
        if tp_sum is not None:
            moe.experts.set_all_reduce_hook(tp_sum)
        for p in moe.experts.parameters():  # fully_shard made new (DTensor) parameters
            setattr(p, EXPERT_SHARDS_ATTR, layout.ep)


def placed_moe_layers(placed: object) -> list[MoE]:
    """This rank's MoE layers in layer order, of a placed model: a module (plain, DDP, FSDP2)
    or a PipelineRunner (its stage modules)."""
    stages = getattr(placed, "modules", None)
    modules = stages if isinstance(stages, list) else [placed]
    return [m for module in modules for m in moe_layers(module)]


def reset_expert_load(placed: object) -> None:
    """Count the per-expert load afresh (at the end of the warm-up steps)."""
    for moe in placed_moe_layers(placed):
        moe.reset_load()


def rank_expert_load(placed: object) -> dict[str, list[list[int]]] | None:
    """Tokens routed and dropped per MoE layer and expert of this rank's tokens since the last
    reset (None for a dense model)."""
    layers = placed_moe_layers(placed)
    if not layers:
        return None
    return {"routed": [m.tokens_routed.tolist() for m in layers],
            "dropped": [m.tokens_dropped.tolist() for m in layers]}


def is_expert_param(p: torch.Tensor) -> bool:
    """Whether a parameter is one of this rank's ep-sharded expert weights."""
    return getattr(p, EXPERT_SHARDS_ATTR, 1) > 1
