"""The communication of a step (analytics/steptime.py): seconds of collectives on a link or at a
measured profile's bandwidth, the exposed tensor- and context-parallel collectives of a layer,
the expert-parallel all-to-alls, and the data-parallel traffic the backward cannot hide (at the
set-up's reduction width, the weights ZeRO gathers at theirs), under the set-up's overlap
(train_setup.OVERLAP_MODES); pure arithmetic, no torch."""

from __future__ import annotations

import math

from accelbench.analytics import comm
from accelbench.analytics.cluster import ClusterSpec
from accelbench.analytics.comm import allreduce_bytes_per_rank, gather_bytes_per_rank
from accelbench.analytics.efficiency import LayerCost
from accelbench.analytics.memory import stages_to_check
from accelbench.analytics.model_states import stage_params
from accelbench.analytics.moe_cost import (
    all_to_all_bytes_per_layer,
    all_to_all_count,
    moe_fraction,
    moe_tokens,
    stage_split,
)
from accelbench.analytics.train_setup import TrainSetup
from accelbench.analytics.training_widths import training_widths
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig


def link_rate(cluster: ClusterSpec, span: int, op: str, message_bytes: float
              ) -> tuple[float, float]:
    """(bytes/s of ring volume per rank, latency) of a collective over `span` devices: the
    profile's bus bandwidth at this message size when one is given and the group is inside
    a node (busbw is the ring volume per rank over the time, nccl-tests), else the link's."""
    profile = cluster.profile
    if profile is not None and span <= cluster.devices_per_node and \
            f"collective:{op}" in profile.curves:
        return profile.bus_bytes_per_s(op, message_bytes), profile.latency_s.get(op, 0.0)
    return cluster.link(span)


def collectives_s(cluster: ClusterSpec, span: int, op: str, volume_per_rank: float,
                  ranks: int, n_ops: int) -> float:
    """Seconds of n_ops collectives moving `volume_per_rank` of ring volume in all over a group
    spanning `span` devices: each at the profile's bus bandwidth for its message and never less
    than its measured latency (a profile inside a node), else on the link
    (comm.collective_time_s)."""
    profile = cluster.profile
    if profile is not None and span <= cluster.devices_per_node and \
            f"collective:{op}" in profile.curves:
        per_op = volume_per_rank / n_ops
        message = per_op / (allreduce_bytes_per_rank(1.0, ranks) if op == "all_reduce"
                            else gather_bytes_per_rank(1.0, ranks))
        return n_ops * max(profile.latency_s.get(op, 0.0),
                           per_op / profile.bus_bytes_per_s(op, message))
    bw, lat = cluster.link(span)
    return comm.collective_time_s(volume_per_rank, ranks, bw, lat, n_ops)


def tp_cp_seconds(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
                   cost: LayerCost) -> tuple[float, float]:
    """Exposed TP collectives and CP ring seconds of one layer and micro-batch under the
    set-up's overlap (OVERLAP_MODES)."""
    spans = layout.spans()
    # under context parallelism a rank's activations are its s/cp tokens
    message = comm.tp_message_bytes(cfg, setup.seq_len // layout.cp, layout.mb, setup.dtype)
    n_ops = comm.tp_collectives_per_layer(layout.recompute)
    tp_s = collectives_s(cluster, spans["tp"], "all_reduce",
                         n_ops * comm.allreduce_bytes_per_rank(message, layout.tp), layout.tp,
                         n_ops) if layout.tp > 1 else 0.0
    if setup.overlap == "megascale":
        tp_s = max(0.0, tp_s - cost.gemm_fwd - cost.gemm_bwd)
    cp_s = 0.0
    if layout.cp > 1:
        volume = comm.cp_bytes_per_layer(cfg, setup.seq_len, layout.mb, setup.dtype, layout.tp,
                                         layout.cp, layout.recompute)
        bw, lat = link_rate(cluster, spans["cp"], "send_recv", volume / (layout.cp - 1))
        hops = comm.cp_rounds_per_layer(layout.recompute) * (layout.cp - 1)
        overlap = cost.core_fwd + cost.core_bwd + (cost.core_fwd if layout.recompute != "none"
                                                   else 0.0)
        cp_s = volume / bw + hops * lat - (0.0 if setup.overlap == "none" else overlap)
    return tp_s, max(0.0, cp_s)


def all_to_all_s(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                 layout: Layout) -> float:
    """An average layer's expert-parallel all-to-alls for one micro-batch on the busiest rank
    (moe_cost.all_to_all_bytes_per_layer with the set-up's moe_imbalance) over the ep group's
    span (ep consecutive data-parallel ranks, tp x cp x ep devices) on its link; what the
    overlap hides is taken off by the caller."""
    if layout.ep == 1:
        return 0.0
    tokens = moe_tokens(setup.seq_len * layout.mb // layout.cp, layout.tp, layout.sp)
    volume = all_to_all_bytes_per_layer(cfg, tokens, layout.ep, setup.dtype, layout.recompute,
                                        setup.moe_imbalance)
    span = layout.spans()["cp"] * layout.ep
    bw, lat = cluster.link(span)
    ops = all_to_all_count(layout.recompute)
    return moe_fraction(cfg) * comm.collective_time_s(volume, layout.ep, bw, lat, ops)


def dp_exposed_s(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
                  n_micro: int, slot_model_s: float, slot_rerun_s: float) -> float:
    """Data-parallel seconds left after overlapping with the backward (or whole pass); the
    gradients are reduced over dp x cp (context-parallel ranks hold the same weights) at the
    set-up's reduction width, the weights ZeRO gathers at the weights' width."""
    group = layout.dp * layout.cp
    if group == 1:
        return 0.0
    ops = comm.dp_collective_ops(layout.zero, n_micro, layout.pp)
    op = "all_reduce" if layout.zero < 2 else "reduce_scatter"
    total = 0.0
    # dense gradients over dp x cp; an MoE's expert gradients over the dp x cp / ep ranks
    # that hold the same experts
    split = largest_stage_split(cfg, layout)
    for params, ranks in zip(split, (group, group // layout.ep), strict=True):
        if params and ranks > 1:
            grad_bytes = params * setup.dp_reduce_bytes
            volume = comm.dp_bytes_per_rank(grad_bytes, ranks, layout.zero, n_micro, layout.pp,
                                            params * training_widths(setup.dtype).weights)
            total += collectives_s(cluster, layout.spans()["dp"], op, volume, ranks,
                                   _dp_ops(cluster, layout, grad_bytes, ops))
    if setup.overlap == "none":
        return total
    backward = slot_model_s * 2 / 3 + slot_rerun_s
    # Under a pipeline ZeRO-2's one gather and deferred reduce-scatter overlap one backward.
    zero2_window = backward if layout.pp > 1 else n_micro * backward
    window = {0: backward, 1: backward, 2: zero2_window}.get(
        layout.zero, n_micro * (slot_model_s + slot_rerun_s))
    if setup.overlap == "megascale":  # the first gather also behind the first forward
        window = max(window, slot_model_s + slot_rerun_s)
    return max(0.0, total - window)


# torch DistributedDataParallel's gradient buckets (its bucket_cap_mb default, 25 MiB)
DDP_BUCKET_BYTES = 25 * 2**20


def _dp_ops(cluster: ClusterSpec, layout: Layout, grad_bytes: float, ops: int) -> int:
    """Collectives of the data-parallel reduction: the analytics' count (one all-reduce under
    ZeRO 0/1); with a measured profile, whose bandwidth depends on the message, a layout the
    runtime wraps in torch DDP (ZeRO 0/1, no tp, pp or ep: parallel/apply.py) reduces one
    bucket of DDP_BUCKET_BYTES at a time."""
    if cluster.profile is None or layout.zero > 1 or max(layout.tp, layout.pp, layout.ep) > 1:
        return ops
    return max(ops, math.ceil(grad_bytes / DDP_BUCKET_BYTES))


def largest_stage_split(cfg: ModelConfig, layout: Layout) -> tuple[float, float]:
    """(dense, expert) parameters on one rank of the pipeline stage that holds the most
    (expert 0 for a dense model; moe_cost.stage_split)."""
    found = [(stage_params(cfg, layout.tp, layout.pp, kind, layers=layers), layers)
             for _, kind, layers in stages_to_check(layout, cfg.n_layer)]
    if not cfg.n_experts:
        return max(params for params, _ in found), 0.0
    return max((stage_split(cfg, params, layout.tp, layout.ep, layers)
                for params, layers in found), key=sum)
