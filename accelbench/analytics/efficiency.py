"""Seconds of one transformer layer from the shapes of its operations; no torch.

Each operation is timed by what bounds it. The block GEMMs (QKV, attention output, MLP in and
out, and the head) take their real per-rank (m, k, n) under tensor parallelism, each in its
three products (forward, input gradient, weight gradient). The attention core is timed apart,
by sequence length and head size: a fused (flash) kernel on the attention curve, an unfused one
as two batched GEMMs plus the traffic of the scores it writes and reads. Norms, residual adds
and activations are memory-bound: their bytes over the memory bandwidth; so, under FP8, are
the block GEMMs' scaling casts (amax and cast of input, weight and grad-output).

The rates come from one of two places. A machine profile (analytics/machine_profile.py, made by
`accelbench calibrate`) gives measured efficiency curves. Without one, built-in curves per
device class are used: a GEMM of f FLOPs takes GEMM_FIXED_S + f / (top x peak), so small
GEMMs reach less of the peak, and fused attention reaches ATTENTION_SHARE of top (or, where a
class has an entry in FUSED_ATTENTION_OF_PEAK, that rate: none is in force). `top` is
the one fitted number per device class (BUILTIN_GEMM_TOP, fitted to the shipped published runs by
analytics/published_fit.py fit_gemm_top; docs/planner.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from accelbench.analytics.activations import kv_width_per_rank
from accelbench.analytics.flops import attention_core_forward_per_token, block_flops
from accelbench.analytics.kernels import gemm_flops
from accelbench.analytics.machine_profile import MachineProfile, curve_key
from accelbench.analytics.moe_cost import moe_fraction, moe_tokens, routed_assignments
from accelbench.analytics.training_widths import (
    FP8_GEMM_EFFICIENCY,
    fp8_cast_bytes,
    training_widths,
)
from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig
from accelbench.config.vocab import GB
from accelbench.hardware.specs import DeviceSpec

# Large-GEMM efficiency (achieved over the dense peak) per device class: fitted to the shipped
# csv's runs of each class only (published_csv.PUBLISHED_RUNS; fit_gemm_top in
# analytics/published_fit.py; a test refits them). A class with no shipped run takes POOLED, the
# fit over every shipped run, and says so. Runs found elsewhere are validation only.
BUILTIN_GEMM_TOP = {"a100": 0.69, "h100": 0.52, "tpu-v4": 0.85}
POOLED_GEMM_TOP = 0.67
# Stated, not fitted: a kernel's fixed cost (launch, tail wave) of a few microseconds, and
# fused attention at 0.75 of the large-GEMM efficiency (FlashAttention-2 reports 50-73% of the
# A100 peak forward and backward, against 80-90% for large cuBLAS GEMMs).
GEMM_FIXED_S = 4e-6
ATTENTION_SHARE = 0.75
# FlashAttention generation by device class, where a source states its rate apart from the
# GEMMs' and the rate is in force: none is. FlashAttention-2 on Hopper reaches 35% of the dense
# peak (Shah et al. 2024, FlashAttention-3, arXiv 2407.08608, abstract; S13 states "SDPA
# FlashAttention-2"), FA2_ON_HOPPER; issue 27 put it in force, and issue 41 judged it with the
# intervals that leave each source out whole: it moved one shipped run (S14-3, MPT-13B on H100)
# out of its interval (coverage per source 70.5% against 71.4% without it; median |error|
# 5.70% either way; worst 20.3% against 17.7%), so it is out, by the rule that a mechanism
# stays only if it worsens neither (docs/planner.md; scripts/planner_tables.py re-judges it).
FA2_ON_HOPPER = {"h100": 0.35}
FUSED_ATTENTION_OF_PEAK: dict[str, float] = {}
HBM_EFFICIENCY = 0.8  # achieved over the datasheet memory bandwidth for streaming kernels
# 16-bit values moved per token by the memory-bound ops of one layer's forward: two norms
# (read and write h each), two residual adds with their bias/dropout (two reads, one write);
# the activation reads its input and writes its output (GELU: 2f, SwiGLU: 3f). A backward
# moves about twice its forward.
NORM_RESIDUAL_VALUES_PER_H = 2 * 2 + 2 * 3
BACKWARD_TRAFFIC = 2.0
# Unfused attention (scores stored): values moved per score element. Forward: QK^T writes
# the scores, scale-mask-softmax reads and writes them, dropout reads, writes and keeps a byte
# mask, PV reads them (6.5); backward: the same tensors' gradients (10.5).
SCORE_VALUES = (6.5, 10.5)
# Device classes: the datasheet rows whose compute behaves alike (H200 has H100's SMs).
_CLASS_OF = {"a100-40gb": "a100", "a100-80gb": "a100", "h100-sxm": "h100", "h100-pcie": "h100",
             "h200": "h100", "tpu-v4": "tpu-v4"}


def device_class(device: DeviceSpec) -> str:
    """The class whose built-in curves a device uses (its datasheet row's key otherwise)."""
    return class_of_key(device.key)


def class_of_key(key: str) -> str:
    """device_class of a device key (a variant's key names its row before the colon)."""
    base = key.partition(":")[0]
    return _CLASS_OF.get(base, base)


def builtin_gemm_top(device: DeviceSpec) -> tuple[float, str]:
    """The built-in large-GEMM efficiency of the device's class, and where it comes from."""
    cls = device_class(device)
    if cls in BUILTIN_GEMM_TOP:
        return BUILTIN_GEMM_TOP[cls], f"fitted to the shipped published {cls} runs"
    return POOLED_GEMM_TOP, f"no shipped published {cls} run: the fit over all shipped runs"


@dataclass(frozen=True)
class BuiltinRates:
    """Built-in curves for one device and precision: peak FLOP/s of the block GEMMs and of the
    rest, the large-GEMM efficiency of each, and the streaming bandwidth."""

    gemm_peak: float
    other_peak: float
    gemm_top: float
    other_top: float
    bytes_per_s: float
    attention_of_peak: float | None = None  # FUSED_ATTENTION_OF_PEAK's, where in force

    def gemm_s(self, m: int, k: int, n: int, gemm_pass: str, block: bool = True) -> float:
        """One product: the fixed cost plus its FLOPs at the large-GEMM rate."""
        peak, top = (self.gemm_peak, self.gemm_top) if block else (self.other_peak,
                                                                   self.other_top)
        return GEMM_FIXED_S + gemm_flops(m, k, n) / (top * peak)

    def attention_s(self, flops: float, direction: str, seq: int, head_dim: int) -> float:
        """A fused attention call of `flops` FLOPs: at the class's FlashAttention rate where
        one is in force, else at ATTENTION_SHARE of the large-GEMM efficiency."""
        share = self.attention_of_peak or ATTENTION_SHARE * self.other_top
        return GEMM_FIXED_S + flops / (share * self.other_peak)

    def stream_s(self, n_bytes: float) -> float:
        """A memory-bound op moving `n_bytes`."""
        return n_bytes / self.bytes_per_s

    def head_extra_s(self, cfg: ModelConfig, tokens: int, tp: int) -> float:
        """No loss or embedding term in the built-in curves (their published fits hold
        without one)."""
        return 0.0

    def block_s(self, cfg: ModelConfig, seq: int, mb: int) -> tuple[float, float] | None:
        """No measured layers in the built-in curves."""
        return None


class ProfileRates:
    """A measured machine profile's curves for one precision (hashed by identity, so that the
    per-shape cache can key on it)."""

    def __init__(self, profile: MachineProfile, dtype: str) -> None:
        if dtype not in profile.peaks_flops_per_s:
            raise ConfigError("profile", f"{profile.source} has no {dtype} GEMM curve",
                              ", ".join(sorted(profile.peaks_flops_per_s)) or "none")
        self.profile, self.dtype = profile, dtype
        self.peak = profile.peaks_flops_per_s[dtype]

    def gemm_s(self, m: int, k: int, n: int, gemm_pass: str, block: bool = True) -> float:
        """One product at the profile's efficiency for its size and pass."""
        return self.profile.gemm_time_s(self.dtype, m, k, n, gemm_pass)

    def attention_s(self, flops: float, direction: str, seq: int, head_dim: int) -> float:
        """A fused attention call at the profile's efficiency for this sequence length."""
        eff = self.profile.attention_efficiency(self.dtype, direction, seq, head_dim)
        return flops / (eff * self.peak)

    def stream_s(self, n_bytes: float) -> float:
        """A memory-bound op at the profile's copy bandwidth for its size."""
        return n_bytes / self.profile.memory_bytes_per_s("copy", n_bytes)

    def head_extra_s(self, cfg: ModelConfig, tokens: int, tp: int) -> float:
        """What a micro-batch spends around the head beyond its GEMM, where the profile
        measured it: the loss over the rank's V/tp logits and the token embedding (and a
        learned position table's), forward and backward; 0 for a curve it lacks."""
        p, seconds = self.profile, 0.0
        if p.has(curve_key("loss", self.dtype)):
            seconds += p.loss_time_s(self.dtype, tokens, cfg.vocab_size // tp)
        if p.has(curve_key("embedding", "fp32")):
            seconds += p.embedding_time_s(tokens, cfg.vocab_size, cfg.d_model,
                                          cfg.tie_embeddings)
            if cfg.position == "learned":
                seconds += p.embedding_time_s(tokens, cfg.n_positions, cfg.d_model, False)
        return seconds

    def block_s(self, cfg: ModelConfig, seq: int, mb: int) -> tuple[float, float] | None:
        """(forward, backward) seconds of one whole layer from measured block cells of this
        shape and precision (`calibrate --from-block`), read at its FLOPs; None without."""
        fwd_key, bwd_key = (self.profile.block_key(self.dtype, phase, cfg, seq)
                            for phase in ("forward", "backward"))
        if not (self.profile.has(fwd_key) and self.profile.has(bwd_key)):
            return None
        flops = block_flops(cfg, seq, mb)
        return (flops.forward / (self.profile.curve(fwd_key).at(flops.forward) * self.peak),
                flops.backward / (self.profile.curve(bwd_key).at(flops.backward) * self.peak))


Rates = BuiltinRates | ProfileRates


def builtin_rates(device: DeviceSpec, dtype: str, peak: float, efficiency: float | None = None
                  ) -> BuiltinRates:
    """The device class's built-in rates in `dtype` (`efficiency` replaces the fitted top);
    `peak` is the dense peak of the precision's MFU column. FP8 runs its block GEMMs at the FP8
    peak x FP8_GEMM_EFFICIENCY; fused attention stays in 16 bits, at the class's
    FUSED_ATTENTION_OF_PEAK where stated."""
    widths = training_widths(dtype)
    top = efficiency if efficiency is not None else builtin_gemm_top(device)[0]
    gemm_peak, gemm_top = peak, top
    if widths.fp8:
        gemm_peak, gemm_top = device.peak_flops_per_s(widths.gemm_peak) or peak, \
            FP8_GEMM_EFFICIENCY
    bw = (device.memory_bw_gb_per_s or 1000.0) * GB * HBM_EFFICIENCY
    return BuiltinRates(gemm_peak, peak, gemm_top, top, bw,
                        FUSED_ATTENTION_OF_PEAK.get(device_class(device)))


@dataclass(frozen=True)
class LayerCost:
    """Seconds of one layer for one micro-batch on one rank, by operation and pass: the block
    GEMMs (forward; backward = input and weight gradients), the attention core, the
    memory-bound ops (FP8's scaling casts among them); and the head's forward and backward
    (last stage only)."""

    gemm_fwd: float
    gemm_bwd: float
    core_fwd: float
    core_bwd: float
    mem_fwd: float
    mem_bwd: float
    head: float

    @property
    def model(self) -> float:
        """Forward and backward of the layer."""
        return (self.gemm_fwd + self.gemm_bwd + self.core_fwd + self.core_bwd + self.mem_fwd
                + self.mem_bwd)


def block_gemm_shapes(cfg: ModelConfig, tokens: int, tp: int) -> tuple[tuple[int, int, int], ...]:
    """(m, k, n) of one rank's forward block GEMMs: QKV (its query heads and its key/value
    width, kv heads replicated when tp exceeds them), attention output, MLP in (2f with a
    SwiGLU gate) and out, each split over tp as Megatron splits them."""
    h, ffn = cfg.d_model, cfg.ffn_dim
    up = 2 * ffn if cfg.activation == "swiglu" else ffn
    kv = kv_width_per_rank(cfg, tp) / tp
    return ((tokens, h, round(h / tp + 2 * kv)), (tokens, h // tp, h),
            (tokens, h, up // tp), (tokens, ffn // tp, h))


def _gemms_s(rates: Rates, shapes: tuple[tuple[int, int, int], ...], block: bool = True
             ) -> tuple[float, float]:
    """(forward, backward) seconds of these forward products and their two gradients."""
    fwd = sum(rates.gemm_s(m, k, n, "forward", block) for m, k, n in shapes)
    bwd = sum(rates.gemm_s(m, n, k, "input_grad", block) + rates.gemm_s(n, m, k, "weight_grad",
                                                                         block)
              for m, k, n in shapes)
    return fwd, bwd


def _core_s(rates: Rates, cfg: ModelConfig, seq: int, mb: int, cp: int, tp: int, width: int,
            fused: bool) -> tuple[float, float]:
    """(forward, backward) seconds of the attention core of one rank's s/cp queries."""
    flops = attention_core_forward_per_token(cfg, seq) * seq * mb / cp / tp
    if fused:
        return (rates.attention_s(flops, "forward", seq, cfg.head_dim),
                rates.attention_s(2 * flops, "backward", seq, cfg.head_dim))
    heads = max(1, cfg.n_head // tp) * mb
    q = seq // cp
    one = rates.gemm_s(heads * q, cfg.head_dim, seq, "forward", block=False)  # per product
    scores = heads * q * seq * width
    return (2 * one + rates.stream_s(SCORE_VALUES[0] * scores),
            4 * one + rates.stream_s(SCORE_VALUES[1] * scores))


_COSTS: dict[tuple, tuple[Rates, ModelConfig, LayerCost]] = {}


def layer_cost(rates: Rates, cfg: ModelConfig, seq: int, mb: int, cp: int, tp: int, sp: bool,
               dtype: str, fused_attention: bool) -> LayerCost:
    """One layer's and the head's seconds for one micro-batch on one rank, cached by shape
    (the planner asks for the same few shapes for thousands of layouts; keyed on the rates'
    and the model's identity, which the entry keeps alive, as hashing a ModelConfig's many
    fields every call cost more than the arithmetic)."""
    key = (id(rates), id(cfg), seq, mb, cp, tp, sp, dtype, fused_attention)
    hit = _COSTS.get(key)
    if hit is not None and hit[0] is rates and hit[1] is cfg:
        return hit[2]
    if len(_COSTS) > 65536:
        _COSTS.clear()
    cost = _layer_cost(rates, cfg, seq, mb, cp, tp, sp, dtype, fused_attention)
    _COSTS[key] = (rates, cfg, cost)
    return cost


def _layer_cost(rates: Rates, cfg: ModelConfig, seq: int, mb: int, cp: int, tp: int, sp: bool,
                dtype: str, fused_attention: bool) -> LayerCost:
    """layer_cost's arithmetic."""
    tokens = seq * mb // cp
    widths = training_widths(dtype)
    width = widths.activations
    shapes = block_gemm_shapes(cfg, tokens, tp)
    gemm_fwd, gemm_bwd = _gemms_s(rates, shapes)
    core_fwd, core_bwd = _core_s(rates, cfg, seq, mb, cp, tp, width, fused_attention)
    act = (3 if cfg.activation == "swiglu" else 2) * cfg.ffn_dim / tp
    replicated = tokens / tp if sp else tokens
    mem_fwd = rates.stream_s((replicated * NORM_RESIDUAL_VALUES_PER_H * cfg.d_model
                              + tokens * act) * width)
    head_fwd, head_bwd = _gemms_s(rates, ((tokens, cfg.d_model, cfg.vocab_size // tp),),
                                  block=False)
    head = head_fwd + head_bwd + rates.head_extra_s(cfg, tokens, tp)
    cast_fwd, cast_bwd = _fp8_casts_s(rates, shapes) if widths.fp8 else (0.0, 0.0)
    cost = LayerCost(gemm_fwd, gemm_bwd, core_fwd, core_bwd, mem_fwd + cast_fwd,
                     BACKWARD_TRAFFIC * mem_fwd + cast_bwd, head)
    measured = rates.block_s(cfg, seq, mb) if tp == cp == 1 else None
    return cost if measured is None else _scaled_to(cost, *measured)


def _fp8_casts_s(rates: Rates, shapes: tuple[tuple[int, int, int], ...]
                 ) -> tuple[float, float]:
    """(forward, backward) seconds of the block GEMMs' FP8 scaling casts
    (precision.fp8_cast_bytes): memory-bound, timed as the other streaming ops; a recompute
    that reruns the memory-bound ops reruns the forward's."""
    fwd, bwd = (sum(part) for part in zip(*(fp8_cast_bytes(*shape) for shape in shapes),
                                           strict=True))
    return rates.stream_s(fwd), rates.stream_s(bwd)


def _scaled_to(cost: LayerCost, fwd_s: float, bwd_s: float) -> LayerCost:
    """The layer's operations scaled so that its forward and its backward take the measured
    whole layer's seconds (the split between GEMMs, core and streaming ops kept, for
    recompute and overlap)."""
    f = fwd_s / (cost.gemm_fwd + cost.core_fwd + cost.mem_fwd)
    b = bwd_s / (cost.gemm_bwd + cost.core_bwd + cost.mem_bwd)
    return LayerCost(cost.gemm_fwd * f, cost.gemm_bwd * b, cost.core_fwd * f,
                     cost.core_bwd * b, cost.mem_fwd * f, cost.mem_bwd * b, cost.head)


def _mlp_shapes(cfg: ModelConfig, m: int, ffn: int) -> tuple[tuple[int, int, int], ...]:
    """(m, k, n) of one MLP's forward GEMMs of width ffn (SwiGLU: gate and up fused)."""
    up = 2 * ffn if cfg.gated_mlp else ffn
    return ((m, cfg.d_model, up), (m, ffn, cfg.d_model))


@lru_cache(maxsize=4096)
def moe_gemm_delta_s(rates: Rates, cfg: ModelConfig, tokens: int, tp: int, ep: int,
                     busiest: float = 1.0, sp: bool = False) -> tuple[float, float]:
    """(forward, backward) seconds an average layer adds to the dense layer's GEMMs: an MoE
    layer runs its router, shared experts and E / ep local experts of routed x ep / E rows
    each at the expert's width (moe_cost.routed_assignments; each GEMM at its own shape's
    rate, its fixed cost counted per expert), in place of the dense MLP split over tp. On the
    busiest ep rank, which the step waits for, the experts' rows are `busiest` times as many
    (moe_cost.busiest_rank_factor). Under sequence parallelism each tensor rank routes its
    own tokens / tp (moe_cost.moe_tokens); without it every tensor rank runs them all."""
    fraction = moe_fraction(cfg)
    if not fraction:
        return 0.0, 0.0
    routed = moe_tokens(tokens, tp, sp)
    per_expert = max(1, round(routed_assignments(cfg, routed) * ep / cfg.n_experts * busiest))
    ex_fwd, ex_bwd = _gemms_s(rates, _mlp_shapes(cfg, per_expert, cfg.expert_ffn_dim))
    local = cfg.n_experts // ep
    shapes = ((routed, cfg.d_model, cfg.n_experts),)
    if cfg.n_shared_experts:
        shapes += _mlp_shapes(cfg, routed, cfg.n_shared_experts * cfg.expert_ffn_dim)
    sh_fwd, sh_bwd = _gemms_s(rates, shapes)
    dense_fwd, dense_bwd = _gemms_s(rates, _mlp_shapes(cfg, tokens, cfg.ffn_dim // tp))
    return (fraction * (local * ex_fwd + sh_fwd - dense_fwd),
            fraction * (local * ex_bwd + sh_bwd - dense_bwd))
