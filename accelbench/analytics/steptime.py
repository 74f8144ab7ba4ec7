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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelbench.analytics import comm
from accelbench.analytics.activations import EAGER, Kernels
from accelbench.analytics.cluster import ClusterSpec
from accelbench.analytics.comm import allreduce_bytes_per_rank, gather_bytes_per_rank
from accelbench.analytics.efficiency import (
    HBM_EFFICIENCY,
    BuiltinRates,
    LayerCost,
    ProfileRates,
    Rates,
    builtin_gemm_top,
    builtin_rates,
    device_class,
    layer_cost,
    moe_gemm_delta_s,
)
from accelbench.analytics.flops import (
    every_other_mm_rerun_params,
    forward_matmuls,
    hardware_flops_per_token,
    model_flops_per_token,
)
from accelbench.analytics.kernels import ADAMW_BYTES_PER_PARAM
from accelbench.analytics.memory import stages_to_check
from accelbench.analytics.model_states import optimizer_bytes_per_param, stage_params
from accelbench.analytics.moe_cost import (
    all_to_all_bytes_per_layer,
    all_to_all_count,
    busiest_rank_factor,
    moe_fraction,
    moe_tokens,
    stage_split,
)
from accelbench.analytics.precision import FP8_GEMM_EFFICIENCY, training_widths
from accelbench.analytics.profile import MachineProfile
from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.vocab import GB
from accelbench.hardware.specs import DeviceSpec

# What each overlap assumption hides behind compute (a stated, per-framework choice:
# `plan --overlap`; published runs take their framework's, published_runs.py).
OVERLAP_MODES = {
    "none": "nothing: every TP/CP/PP/DP collective waits for compute and compute for it",
    "megatron": "Megatron-LM and PyTorch FSDP defaults: DP gradient reduction behind the "
                "backward (ZeRO-3/FSDP gathers also behind the forward), CP ring passes behind "
                "the attention core; TP collectives and PP sends exposed",
    "megatron-a2a": "Megatron-Core with MoE all-to-all overlap (1F1B A2A overlap, "
                    "--overlap-moe-expert-parallel-comm; DeepSeek-V3's DualPipe): as megatron, "
                    "plus each expert-parallel all-to-all behind the paired micro-batch's "
                    "compute of the same layer",
    "megascale": "MegaScale (Jiang et al. 2024): as megatron, plus TP all-gathers and "
                 "reduce-scatters behind the GEMMs beside them, PP sends behind compute, "
                 "DP's first gather behind the forward, and EP all-to-alls as megatron-a2a",
}
# The modes that hide the expert-parallel all-to-all (megatron's alltoall dispatcher waits).
A2A_OVERLAP_MODES = frozenset({"megatron-a2a", "megascale"})


@dataclass(frozen=True)
class TrainSetup:
    """What is trained: global batch in sequences, sequence length, precision, optimizer, and
    whether attention is fused (flash / SDPA: the scores are never stored, the usual case)."""

    global_batch: int
    seq_len: int
    dtype: str = "bf16"
    optimizer: str = "adam"
    fused_attention: bool = True
    sparsity: float = 0.0  # weight sparsity of the block matrices (docs/sparsity.md)
    sparsity_pattern: str = "unstructured"  # or 2:4 (level 0.5)
    overlap: str = "megatron"  # what communication hides behind compute: OVERLAP_MODES
    kernels: Kernels = EAGER  # what the framework's kernels save for backward (memory.py)
    # the busiest expert's routed assignments over the mean (1.0 balanced, as benchmarks that
    # force-balance routing run; the runtime records moe_load_imbalance): moe_cost.py
    moe_imbalance: float = 1.0
    # bytes a gradient value moves in the data-parallel reduction (None: the precision's,
    # training_widths' reduce: 4 under bf16, as Megatron-LM and accelbench's runtime reduce;
    # a published run's framework sets its own: published_run.BF16_REDUCE_BYTES)
    reduce_bytes: int | None = None

    @property
    def dp_reduce_bytes(self) -> int:
        """Bytes a gradient value moves in the data-parallel reduction."""
        return self.reduce_bytes or training_widths(self.dtype).reduce

    @property
    def tokens_per_step(self) -> int:
        """Tokens in one optimizer step."""
        return self.global_batch * self.seq_len


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


def compute_efficiency(device: DeviceSpec, override: float | None = None) -> float:
    """The large-GEMM fraction of peak assumed: an override, else the device class's fitted
    top (analytics/efficiency.py)."""
    if override is not None:
        return override
    return builtin_gemm_top(device)[0]


def peak_flops(device: DeviceSpec, dtype: str) -> float:
    """Dense peak FLOP/s for the dtype; a device without one cannot be planned (no guessing)."""
    peak = device.peak_flops_per_s(dtype)
    if not peak:
        raise ConfigError("dtype", f"{device.key} has no {dtype} peak in the device table",
                          ", ".join(device.peak_tflops) or "none known")
    return peak


def compute_rates(device: DeviceSpec, dtype: str, efficiency: float | None = None
                  ) -> tuple[float, float]:
    """Large-GEMM FLOP/s of (block GEMMs, all other FLOPs): the same rate unless the precision
    runs its GEMMs at a peak of its own (fp8: the FP8 peak x FP8_GEMM_EFFICIENCY, the rest at
    the BF16 peak x the compute efficiency); smaller GEMMs reach less (efficiency.py)."""
    widths = training_widths(dtype)
    other = peak_flops(device, widths.peak) * compute_efficiency(device, efficiency)
    if not widths.fp8:
        return other, other
    return peak_flops(device, widths.gemm_peak) * FP8_GEMM_EFFICIENCY, other


def sparse_gemm_passes(setup: TrainSetup, device: DeviceSpec) -> tuple[float, float]:
    """The block GEMMs' time in forward-GEMM units for (forward + backward, one recompute):
    (3, 1) dense and masked dense (unstructured, or a device with no sparse peak); with 2:4
    on a device whose vendor quotes a sparse peak, the forward and input-gradient GEMMs at
    that peak and the weight gradient dense, as accelbench's 2:4 kernel path runs them. An
    ideal: measured 2:4 training speedups are often lower (docs/sparsity.md)."""
    factor = device.sparse_factor
    if setup.sparsity_pattern != "2:4" or not setup.sparsity or not factor:
        return 3.0, 1.0
    return 2.0 / factor + 1.0, 1.0 / factor


def sparse_compute_note(setup: TrainSetup, device: DeviceSpec) -> str:
    """How a sparse plan's GEMMs are timed, for the plan's notes."""
    if sparse_gemm_passes(setup, device)[0] == 3.0:
        return "masked dense: the same GEMM time as dense"
    return (f"forward and input-gradient GEMMs of the block matrices at the {device.key}'s 2:4 "
            f"peak ({device.sparse_factor:g}x dense), weight gradients dense: an ideal, "
            "measured 2:4 training speedups are often lower")


def layer_rates(cluster: ClusterSpec, dtype: str, efficiency: float | None = None) -> Rates:
    """The compute rates of this cluster's devices: its measured profile's curves, else the
    device class's built-in curves (`efficiency` replacing their fitted large-GEMM top)."""
    if cluster.profile is not None:
        return _profile_rates(cluster.profile, dtype)
    key = (cluster.device.key, dtype, efficiency)
    if key not in _BUILTIN_RATES:  # device keys are unique, variants included
        peak = peak_flops(cluster.device, training_widths(dtype).peak)
        _BUILTIN_RATES[key] = builtin_rates(cluster.device, dtype, peak, efficiency)
    return _BUILTIN_RATES[key]


_BUILTIN_RATES: dict[tuple[str, str, float | None], BuiltinRates] = {}


def compute_source(cluster: ClusterSpec, efficiency: float | None = None) -> str:
    """Where a plan's compute rates come from, in words."""
    if cluster.profile is not None:
        return f"machine profile, {cluster.profile.source}"
    if efficiency is not None:
        return f"built-in curves with a large-GEMM efficiency of {efficiency:g} (given)"
    top, source = builtin_gemm_top(cluster.device)
    return (f"built-in {device_class(cluster.device)} curves: large GEMMs at {top:.0%} of peak "
            f"({source})")


_PROFILE_RATES: dict[tuple[int, str], ProfileRates] = {}


def _profile_rates(profile: MachineProfile, dtype: str) -> ProfileRates:
    """One ProfileRates per profile and precision (kept, so that layer_cost's cache hits)."""
    key = (id(profile), dtype)
    if key not in _PROFILE_RATES or _PROFILE_RATES[key].profile is not profile:
        _PROFILE_RATES[key] = ProfileRates(profile, training_widths(dtype).peak)
    return _PROFILE_RATES[key]


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


def _tp_cp_seconds(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
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
    tp_s, cp_s = _tp_cp_seconds(cfg, cluster, setup, layout, cost)
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


def _dp_exposed_s(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
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
    split = _largest_stage_split(cfg, layout)
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


def _largest_stage_split(cfg: ModelConfig, layout: Layout) -> tuple[float, float]:
    """(dense, expert) parameters on one rank of the pipeline stage that holds the most
    (expert 0 for a dense model; moe_cost.stage_split)."""
    found = [(stage_params(cfg, layout.tp, layout.pp, kind, layers=layers), layers)
             for _, kind, layers in stages_to_check(layout, cfg.n_layer)]
    if not cfg.n_experts:
        return max(params for params, _ in found), 0.0
    return max((stage_split(cfg, params, layout.tp, layout.ep, layers)
                for params, layers in found), key=sum)


def _optimizer_s(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                 layout: Layout) -> float:
    """Adam/SGD update streams weights, grads and states once (read and write), HBM-bound;
    with a profile: its measured update (norm, clip and AdamW: optimizer:adamw), else its
    AdamW streaming curve at the bytes that curve counts (kernels.ADAMW_BYTES_PER_PARAM)."""
    dense, expert = _largest_stage_split(cfg, layout)
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
    dp_s = _dp_exposed_s(cfg, cluster, setup, layout, n_micro, model_s, rerun_s)
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
