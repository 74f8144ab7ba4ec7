"""Predicted step time of a layout on a cluster, with a breakdown; pure arithmetic, no torch.

One optimizer step of a pipeline with m micro-batches and v virtual stages takes
(m + (p-1)/v) slots; a slot is one micro-batch's compute on the slowest stage plus its exposed
tensor-parallel collectives and pipeline sends. Then the data-parallel traffic that the
backward could not hide, then the optimizer update (memory-bound). Overlap assumptions:
tensor-parallel collectives and pipeline sends are not overlapped with compute (Megatron-LM's
default); data-parallel traffic overlaps the backward it follows (ZeRO 0/1: the last
micro-batch's backward; ZeRO 2: every backward; ZeRO 3: every forward and backward).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from accelbench.analytics import comm
from accelbench.analytics.cluster import ClusterSpec
from accelbench.analytics.flops import (
    block_forward_per_token,
    hardware_flops_per_token,
    model_flops_per_token,
    model_forward_per_token,
    recompute_flops_per_token,
)
from accelbench.analytics.memory import BYTES_PER_VALUE, stage_params
from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.vocab import GB, RECOMPUTE_KINDS
from accelbench.hardware.specs import DeviceSpec

# Fraction of the dense peak that a transformer layer's compute reaches, per device kind. One
# number for all kinds, not one per run: the median, over the published runs in
# accelbench.analytics.published, of the efficiency each would need (0.679), rounded; the
# validation reports leave-one-out errors too. Replace with calibrate_efficiency() on
# accelbench's own measured runs where they exist. See docs/planner.md.
CALIBRATED_EFFICIENCY = 0.68
DEFAULT_COMPUTE_EFFICIENCY = {"gpu": CALIBRATED_EFFICIENCY, "tpu": CALIBRATED_EFFICIENCY,
                              "hpu": CALIBRATED_EFFICIENCY}
HBM_EFFICIENCY = 0.8  # achieved over peak memory bandwidth for the streaming optimizer update


@dataclass(frozen=True)
class TrainSetup:
    """What is trained: global batch in sequences, sequence length, precision, optimizer, and
    whether attention is fused (flash / SDPA: the scores are never stored, the usual case)."""

    global_batch: int
    seq_len: int
    dtype: str = "bf16"
    optimizer: str = "adam"
    fused_attention: bool = True

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

    @property
    def step_s(self) -> float:
        """The whole step."""
        return (self.compute_s + self.recompute_s + self.tp_comm_s + self.pp_comm_s
                + self.dp_comm_exposed_s + self.bubble_s + self.optimizer_s)

    def days_for_tokens(self, tokens: float) -> float:
        """Days to train on `tokens` tokens at this rate."""
        return tokens / self.tokens_per_s / 86400

    def to_dict(self) -> dict[str, float]:
        """Plain dict for JSON."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["step_s"] = self.step_s
        return out


@lru_cache(maxsize=256)
def _per_token(cfg: ModelConfig, seq_len: int) -> tuple[float, float, dict[str, float]]:
    """Forward FLOPs per token of one block and of the head; recompute FLOPs per token by kind.

    All from accelbench.analytics.flops (one formula for measured and predicted MFU).
    """
    block = block_forward_per_token(cfg, seq_len)
    head = model_forward_per_token(cfg, seq_len) - cfg.n_layer * block
    rerun = {k: recompute_flops_per_token(cfg, seq_len, k) for k in RECOMPUTE_KINDS}
    return block, head, rerun


def compute_efficiency(device: DeviceSpec, override: float | None = None) -> float:
    """The fraction of peak assumed for compute: an override, else the device class default."""
    if override is not None:
        return override
    return DEFAULT_COMPUTE_EFFICIENCY.get(device.kind, 0.5)


def peak_flops(device: DeviceSpec, dtype: str) -> float:
    """Dense peak FLOP/s for the dtype; a device without one cannot be planned (no guessing)."""
    peak = device.peak_flops_per_s(dtype)
    if not peak:
        raise ConfigError("dtype", f"{device.key} has no {dtype} peak in the device table",
                          ", ".join(device.peak_tflops) or "none known")
    return peak


def _slot_compute_s(cfg: ModelConfig, setup: TrainSetup, layout: Layout,
                    flops_per_s: float) -> tuple[float, float]:
    """One micro-batch on the slowest stage: (model compute, recompute) seconds.

    Blocks split over pp and tp; the output head (6*V*h per token) sits on the last stage.
    """
    block, head, rerun = _per_token(cfg, setup.seq_len)
    tokens = setup.seq_len * layout.mb
    stage_model = 3 * (block * cfg.n_layer / layout.pp + head)
    stage_rerun = rerun[layout.recompute] / layout.pp
    scale = tokens / layout.tp / flops_per_s
    return stage_model * scale, stage_rerun * scale


def _dp_exposed_s(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
                  n_micro: int, slot_model_s: float, slot_rerun_s: float) -> float:
    """Data-parallel seconds left after overlapping with the backward (or whole pass)."""
    if layout.dp == 1:
        return 0.0
    grad_bytes = stage_params(cfg, layout.tp, layout.pp, "first") * BYTES_PER_VALUE[setup.dtype]
    volume = comm.dp_bytes_per_rank(grad_bytes, layout.dp, layout.zero, n_micro, layout.pp)
    bw, lat = cluster.link(layout.spans()["dp"])
    total = comm.collective_time_s(volume, layout.dp, bw, lat,
                                   comm.dp_collective_ops(layout.zero, n_micro, layout.pp))
    backward = slot_model_s * 2 / 3 + slot_rerun_s
    # Under a pipeline ZeRO-2's one gather and deferred reduce-scatter overlap one backward.
    zero2_window = backward if layout.pp > 1 else n_micro * backward
    window = {0: backward, 1: backward, 2: zero2_window}.get(
        layout.zero, n_micro * (slot_model_s + slot_rerun_s))
    return max(0.0, total - window)


def _optimizer_s(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup,
                 layout: Layout) -> float:
    """Adam/SGD update streams weights, grads and states once (read and write), HBM-bound."""
    n_local = stage_params(cfg, layout.tp, layout.pp, "first")
    if layout.zero >= 1:
        n_local /= layout.dp
    width = BYTES_PER_VALUE[setup.dtype]
    states = 12 if width < 4 else 8
    bytes_moved = n_local * (2 * width + 2 * states)
    bw = (cluster.device.memory_bw_gb_per_s or 1000.0) * GB * HBM_EFFICIENCY
    return bytes_moved / bw


def estimate_step(cfg: ModelConfig, cluster: ClusterSpec, setup: TrainSetup, layout: Layout,
                  efficiency: float | None = None) -> StepBreakdown:
    """Predicted seconds per optimizer step, by cause, for a layout that divides (not checked)."""
    peak = peak_flops(cluster.device, setup.dtype)
    flops_per_s = peak * compute_efficiency(cluster.device, efficiency)
    n_micro = setup.global_batch // (layout.dp * layout.mb)
    model_s, rerun_s = _slot_compute_s(cfg, setup, layout, flops_per_s)
    spans = layout.spans()
    bw, lat = cluster.link(spans["tp"])
    message = comm.tp_message_bytes(cfg, setup.seq_len, layout.mb, setup.dtype)
    n_ops = comm.tp_collectives_per_layer(layout.recompute)
    tp_s = cfg.n_layer / layout.pp * comm.collective_time_s(
        n_ops * comm.allreduce_bytes_per_rank(message, layout.tp), layout.tp, bw, lat, n_ops)
    pp_s = 0.0
    if layout.pp > 1:
        bw, lat = cluster.link(spans["pp"])
        send = comm.pp_message_bytes(cfg, setup.seq_len, layout.mb, setup.dtype, layout.tp)
        pp_s = comm.pp_sends_per_microbatch(layout.vp) * (send / bw + lat)
    slot_s = model_s + rerun_s + tp_s + pp_s
    bubble_s = (layout.pp - 1) / layout.vp * slot_s
    dp_s = _dp_exposed_s(cfg, cluster, setup, layout, n_micro, model_s, rerun_s)
    opt_s = _optimizer_s(cfg, cluster, setup, layout)
    step_s = n_micro * slot_s + bubble_s + dp_s + opt_s
    tokens_per_s = setup.tokens_per_step / step_s
    denominator = layout.world_size * peak
    return StepBreakdown(
        n_micro * model_s, n_micro * rerun_s, n_micro * tp_s, n_micro * pp_s, dp_s, bubble_s,
        opt_s, tokens_per_s,
        tokens_per_s * model_flops_per_token(cfg, setup.seq_len).total / denominator,
        tokens_per_s * hardware_flops_per_token(cfg, setup.seq_len, layout.recompute)
        / denominator)
