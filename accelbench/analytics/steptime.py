"""Predicted step time of a layout on a cluster, with a breakdown; pure arithmetic, no torch.

One optimizer step of a pipeline with m micro-batches and v virtual stages takes
(m + (p-1)/v) slots; a slot is one micro-batch's compute on the slowest stage plus its exposed
tensor-parallel collectives and pipeline sends. With stages of unequal time (uneven layer
counts, the head on the last) one step of 1F1B is (m - 1) slots of the slowest stage plus one
slot of every stage, so the bubble is the sum of the stages' slots less the slowest, over v.
Then the data-parallel traffic that compute could not hide, then the optimizer update
(memory-bound). A slot's compute is the sum of its operations, each timed from its shape
(analytics/efficiency.py: GEMMs, attention core, memory-bound ops). What communication hides
behind compute is the set-up's stated overlap (OVERLAP_MODES). Under "megatron" (the default)
tensor-parallel collectives and pipeline sends are exposed; context parallelism's ring passes
overlap the attention core they feed, only the rest is exposed; data-parallel traffic overlaps
the backward it follows (ZeRO 0/1: the last micro-batch's backward; ZeRO 2: every backward;
ZeRO 3: every forward and backward); expert-parallel all-to-alls are exposed unless the mode
hides them (A2A_OVERLAP_MODES). A mixture of experts' step waits for its busiest expert-parallel
rank: its expert GEMMs and all-to-alls carry the set-up's moe_imbalance (moe_cost.py).

What is trained and the overlap modes are analytics/train_setup.py's, the compute rates
analytics/compute_rates.py's, the communication's seconds analytics/step_comm.py's; this module
adds them up into a step.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics import comm
from accelbench.analytics.activations import Kernels
from accelbench.analytics.cluster import ClusterSpec
from accelbench.analytics.compute_rates import layer_rates, peak_flops, sparse_gemm_passes
from accelbench.analytics.efficiency import HBM_EFFICIENCY, LayerCost, layer_cost, moe_gemm_delta_s
from accelbench.analytics.flops import (
    every_other_mm_rerun_params,
    forward_matmuls,
    hardware_flops_per_token,
    model_flops_per_token,
)
from accelbench.analytics.kernels import ADAMW_BYTES_PER_PARAM
from accelbench.analytics.memory import stages_to_check
from accelbench.analytics.model_states import optimizer_bytes_per_param
from accelbench.analytics.moe_cost import busiest_rank_factor
from accelbench.analytics.step_comm import (
    all_to_all_s,
    dp_exposed_s,
    largest_stage_split,
    link_rate,
    tp_cp_seconds,
)
from accelbench.analytics.train_setup import A2A_OVERLAP_MODES, TrainSetup
from accelbench.analytics.training_widths import training_widths
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.vocab import GB


@dataclass(frozen=True)
class StepBreakdown:
    """Seconds per step by cause, and the rates that follow; compute excludes recompute."""

    compute_s: float
    recompute_s: float
    tp_comm_s: float
    pp_comm_s: float
    dp_comm_exposed_s: float
    bubble_s: float
    optimizer_s: float
    tokens_per_s: float
    mfu: float
    hfu: float
    cp_comm_exposed_s: float = 0.0
    ep_comm_s: float = 0.0  # expert parallelism's all-to-alls, exposed (moe_cost.py)
    mfu_peak: str = "bf16"  # the peak column MFU and HFU divide by (bf16 under fp8)
    fp8_peak_utilisation: float | None = None  # model FLOPs over the FP8 peak, fp8 runs only

    @property
    def step_s(self) -> float:
        """The whole step."""
        return (self.compute_s + self.recompute_s + self.tp_comm_s + self.pp_comm_s
                + self.cp_comm_exposed_s + self.dp_comm_exposed_s + self.bubble_s
                + self.optimizer_s + self.ep_comm_s)

    @property
    def comm_exposed_s(self) -> float:
        """Every communication second not hidden behind compute."""
        return (self.tp_comm_s + self.pp_comm_s + self.cp_comm_exposed_s
                + self.dp_comm_exposed_s + self.ep_comm_s)

    def days_for_tokens(self, tokens: float) -> float:
        """Days to train on `tokens` tokens at this rate."""
        return tokens / self.tokens_per_s / 86400

    def to_dict(self) -> dict[str, float | str | None]:
        """Plain dict for JSON."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["step_s"] = self.step_s
        return out


@dataclass(frozen=True)
class LayerSeconds:
    """Seconds of one layer and of the head for one micro-batch on one rank, by cause."""

    model: float
    rerun: float
    tp: float
    cp: float
    head: float
    ep: float = 0.0  # an average layer's all-to-alls left exposed (MoE layers only)

    @property
    def layer(self) -> float:
        """One layer's whole slot share."""
        return self.model + self.rerun + self.tp + self.cp + self.ep


def _selective_rerun_s(cfg: ModelConfig, cost: LayerCost, kernels: Kernels) -> float:
    """What selective recompute reruns of a layer: the attention core (Korthikanti), or under
    torchtitan's op-level policy every second matmul (by its share of the block's matmul
    weights) and the memory-bound ops, but not the saved attention."""
    if kernels.selective != "every_other_mm":
        return cost.core_fwd
    share = every_other_mm_rerun_params(cfg) / sum(w for w, _ in forward_matmuls(cfg))
    return cost.gemm_fwd * share + cost.mem_fwd


def _layer_seconds(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
                   efficiency: float | None) -> LayerSeconds:
    """One micro-batch of one layer (and of the head) on one rank, from the shapes of its
    operations (analytics/efficiency.py): forward + backward, recompute, exposed TP
    collectives and CP ring; the block GEMMs scaled by sparse_gemm_passes."""
    rates = layer_rates(cluster, setup.dtype, efficiency)
    cost = layer_cost(rates, cfg, setup.seq_len, layout.mb, layout.cp, layout.tp, layout.sp,
                      setup.dtype, setup.fused_attention)
    passes, rerun_passes = sparse_gemm_passes(setup, cluster.device)
    gemm = (cost.gemm_fwd + cost.gemm_bwd) * passes / 3
    model = cost.model - cost.gemm_fwd - cost.gemm_bwd + gemm
    rerun = {"none": 0.0, "selective": _selective_rerun_s(cfg, cost, setup.kernels),
             "full": cost.gemm_fwd * rerun_passes + cost.core_fwd + cost.mem_fwd
             }[layout.recompute]
    tp_s, cp_s = tp_cp_seconds(cfg, cluster, setup, layout, cost)
    if not cfg.n_experts:
        return LayerSeconds(model=model, rerun=rerun, tp=tp_s, cp=cp_s, head=cost.head)
    tokens = setup.seq_len * layout.mb // layout.cp
    busiest = busiest_rank_factor(cfg, layout.ep, setup.moe_imbalance)
    moe_fwd, moe_bwd = moe_gemm_delta_s(rates, cfg, tokens, layout.tp, layout.ep, busiest,
                                        layout.sp)
    moe_rerun = moe_fwd if layout.recompute == "full" else 0.0
    model, rerun = model + moe_fwd + moe_bwd, rerun + moe_rerun
    a2a_s = all_to_all_s(cfg, cluster, setup, layout)
    if setup.overlap in A2A_OVERLAP_MODES:  # behind the paired micro-batch's layer compute
        a2a_s = max(0.0, a2a_s - model - rerun)
    return LayerSeconds(model=model, rerun=rerun, tp=tp_s, cp=cp_s, head=cost.head, ep=a2a_s)


def _optimizer_s(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                 layout: Layout) -> float:
    """Adam/SGD update streams weights, grads and states once (read and write), HBM-bound;
    with a profile: its measured update (norm, clip and AdamW: optimizer:adamw), else its
    AdamW streaming curve at the bytes that curve counts (kernels.ADAMW_BYTES_PER_PARAM)."""
    dense, expert = largest_stage_split(cfg, layout)
    n_local = dense + expert
    if layout.zero >= 1:
        n_local = (dense + expert * layout.ep) / (layout.dp * layout.cp)
    profile = cluster.profile
    if profile is not None and profile.has("optimizer:adamw"):  # the train loop's, measured
        return profile.optimizer_time_s(n_local)
    if profile is not None and profile.has("memory:adamw"):  # AdamW alone, counted as measured
        return profile.bytes_time_s("memory:adamw", ADAMW_BYTES_PER_PARAM * n_local)
    widths = training_widths(setup.dtype)
    states = optimizer_bytes_per_param(setup.dtype, setup.optimizer)
    bytes_moved = n_local * (widths.weights + widths.grads + 2 * states)
    bw = (cluster.device.memory_bw_gb_per_s or 1000.0) * GB * HBM_EFFICIENCY
    return bytes_moved / bw


def slowest_stage(cfg: ModelConfig, layout: Layout, per: LayerSeconds,
                  pp_send_s: float) -> tuple[float, bool, float]:
    """(layers, holds the head) of the slowest pipeline stage, and the sum of every stage's
    slot for one micro-batch: each stage's layers (stage_layer_counts when uneven) plus the
    head on the last and its sends."""
    if layout.pp == 1:
        return float(cfg.n_layer), True, cfg.n_layer * per.layer + per.head
    total = cfg.n_layer * per.layer + per.head + layout.pp * pp_send_s
    slow = max(((layers, kind == "last") for _, kind, layers in
                stages_to_check(layout, cfg.n_layer)),
               key=lambda stage: stage[0] * per.layer + (per.head if stage[1] else 0.0))
    return slow[0], slow[1], total


def estimate_step(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
                  efficiency: float | None = None) -> StepBreakdown:
    """Predicted seconds per optimizer step, by cause, for a layout that divides (not checked)."""
    widths = training_widths(setup.dtype)
    n_micro = setup.global_batch // (layout.dp * layout.mb)
    per = _layer_seconds(cfg, cluster, setup, layout, efficiency)
    pp_s = 0.0
    if layout.pp > 1:
        send = comm.pp_message_bytes(cfg, setup.seq_len // layout.cp, layout.mb, setup.dtype,
                                     layout.tp)
        bw, lat = link_rate(cluster, layout.spans()["pp"], "send_recv", send)
        pp_s = comm.pp_sends_per_microbatch(layout.vp) * (send / bw + lat)
        if setup.overlap == "megascale":  # sends behind the next micro-batch's compute
            pp_s = max(0.0, pp_s - per.layer * cfg.n_layer / layout.pp)
    layers, head, all_stages_s = slowest_stage(cfg, layout, per, pp_s)
    model_s = layers * per.model + (per.head if head else 0.0)
    rerun_s, tp_s, cp_s = (layers * x for x in (per.rerun, per.tp, per.cp))
    ep_s = layers * per.ep
    slot_s = model_s + rerun_s + tp_s + cp_s + ep_s + pp_s
    bubble_s = (all_stages_s - slot_s) / layout.vp
    dp_s = dp_exposed_s(cfg, cluster, setup, layout, n_micro, model_s, rerun_s)
    opt_s = _optimizer_s(cfg, cluster, setup, layout)
    step_s = n_micro * slot_s + bubble_s + dp_s + opt_s
    tokens_per_s = setup.tokens_per_step / step_s
    per_device = tokens_per_s / layout.world_size
    model_flops = model_flops_per_token(cfg, setup.seq_len).total
    peak = peak_flops(cluster.device, widths.peak)
    fp8_util = (per_device * model_flops / peak_flops(cluster.device, widths.gemm_peak)
                if widths.fp8 else None)
    hardware_flops = hardware_flops_per_token(cfg, setup.seq_len, layout.recompute,
                                              selective=setup.kernels.selective)
    return StepBreakdown(
        compute_s=n_micro * model_s, recompute_s=n_micro * rerun_s, tp_comm_s=n_micro * tp_s,
        pp_comm_s=n_micro * pp_s, dp_comm_exposed_s=dp_s, bubble_s=bubble_s,
        optimizer_s=opt_s, tokens_per_s=tokens_per_s, mfu=per_device * model_flops / peak,
        hfu=per_device * hardware_flops / peak, cp_comm_exposed_s=n_micro * cp_s,
        ep_comm_s=n_micro * ep_s, mfu_peak=widths.peak, fp8_peak_utilisation=fp8_util)
