"""A machine profile: what `accelbench calibrate` measured, as curves the planner can read.

A profile holds named curves, each a value against a size: GEMM efficiency (achieved FLOP/s over
the precision's peak) against FLOPs per call, attention efficiency against sequence length (one
curve per precision, direction and head size), memory bandwidth (bytes/s) against bytes per
call, and collective bus bandwidth (bytes/s, nccl-tests convention: analytics/kernels.py)
against message bytes, plus each collective's latency. A curve is read on log(size), piecewise
linear between the measured sizes and clamped at both ends (the first and last measured values
hold beyond them). No torch here: a profile is rebuilt from a stored record's plain dicts
(report/stored_profile.py), and built-in curves per device class can be made the same way.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from accelbench.analytics.kernels import (
    attention_flops,
    bus_factor,
    embedding_bytes,
    gemm_flops,
    loss_bytes,
    optimizer_bytes,
)
from accelbench.analytics.training_widths import BYTES_PER_VALUE
from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig
from accelbench.config.records.profile import ProfileMetrics

# a step's own costs outside its layers (loss, embedding, optimizer: bytes/s against bytes per
# call) and whole measured layers (block: efficiency against FLOPs per call, `accelbench
# calibrate --from-block`)
POINT_OPS = ("gemm", "attention", "memory", "loss", "embedding", "optimizer", "collective",
             "block")
EFFICIENCY_OPS = ("gemm", "attention", "block")  # fractions of the precision's peak


@dataclass(frozen=True)
class Point:
    """One timed call: its curve, the curve's size (x), the work it did (FLOPs, or bytes moved:
    for a collective the bus bytes, message x bus factor) and the spread of its timings."""

    op: str  # one of POINT_OPS
    curve: str  # curve_key(...)
    label: str  # what ran, e.g. "mlp_up 1024x768x3072"
    dtype: str
    size: float  # FLOPs per call (gemm, block), sequence (attention), bytes (the others)
    work: float  # FLOPs (gemm, attention, block), bus bytes (collective), bytes (the others)
    time_s_median: float
    time_s_min: float
    time_s_max: float
    time_s_iqr: float
    samples: int
    shape: dict[str, Any] = field(default_factory=dict)

    @property
    def rate_per_s(self) -> float:
        """Work over the median time: FLOP/s, or bytes/s (bus bandwidth for a collective)."""
        return self.work / self.time_s_median


def point_dict(point: Point) -> dict[str, Any]:
    """A point as a record stores it, its rate included for readers of the raw record."""
    return {**asdict(point), "rate_per_s": point.rate_per_s}


def point_from_dict(data: dict[str, Any]) -> Point:
    """A stored point back (derived keys such as rate_per_s are dropped)."""
    names = {f.name for f in fields(Point)}
    return Point(**{k: v for k, v in data.items() if k in names})


def curve_key(op: str, *parts: object) -> str:
    """'gemm:bf16:forward', 'attention:bf16:forward:d64', 'memory:copy', 'loss:fp32',
    'embedding:fp32', 'optimizer:adamw', 'collective:all_reduce',
    'block:fp32:forward:h768-f3072-a12-s256'."""
    return ":".join((op, *map(str, parts)))


def block_shape(cfg: ModelConfig, seq: int) -> str:
    """What a block curve is measured for (its width, MLP width, heads and sequence): the
    curve is read at other batches of this shape only."""
    return f"h{cfg.d_model}-f{cfg.ffn_dim}-a{cfg.n_head}-s{seq}"


@dataclass(frozen=True)
class Curve:
    """Values at ascending sizes, read on log(size), piecewise linear, clamped at the ends."""

    sizes: tuple[float, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.sizes or len(self.sizes) != len(self.values):
            raise ValueError("a curve needs as many values as sizes, at least one")
        if any(s <= 0 for s in self.sizes) or list(self.sizes) != sorted(set(self.sizes)):
            raise ValueError(f"sizes must be positive and strictly ascending: {self.sizes}")

    def at(self, size: float) -> float:
        """The value at `size`: interpolated on log(size) between the two measured sizes around
        it; the first or last value outside the measured range."""
        if not size > 0:
            raise ValueError(f"size must be positive, got {size}")
        if size <= self.sizes[0]:
            return self.values[0]
        if size >= self.sizes[-1]:
            return self.values[-1]
        i = bisect.bisect_right(self.sizes, size)
        x0, x1 = math.log(self.sizes[i - 1]), math.log(self.sizes[i])
        t = (math.log(size) - x0) / (x1 - x0)
        return self.values[i - 1] + t * (self.values[i] - self.values[i - 1])


def make_curve(pairs: list[tuple[float, float]]) -> Curve:
    """A curve from (size, value) pairs; values measured at the same size give their median."""
    by_size: dict[float, list[float]] = {}
    for size, value in pairs:
        by_size.setdefault(float(size), []).append(value)
    sizes = sorted(by_size)
    return Curve(tuple(sizes), tuple(statistics.median(by_size[s]) for s in sizes))


@dataclass(frozen=True)
class MachineProfile:
    """Curves of one machine (measured, or built in for a device class) with the peaks its
    efficiencies are fractions of; the lookups the planner calls."""

    device_type: str
    device_name: str
    source: str  # "measured (record N)", or where built-in curves come from
    peaks_flops_per_s: dict[str, float]  # dtype -> the FLOP/s efficiency 1.0 stands for
    peak_labels: dict[str, str]
    curves: dict[str, Curve]
    latency_s: dict[str, float] = field(default_factory=dict)  # collective op -> seconds
    collective_ranks: int | None = None  # ranks the collective curves were measured on
    device_key: str = ""  # the device's datasheet row (hardware table), "" when it has none

    def curve(self, key: str) -> Curve:
        """The named curve; a missing one is one line naming those the profile has."""
        if key not in self.curves:
            raise ConfigError("profile", f"has no curve {key!r}", ", ".join(sorted(self.curves)))
        return self.curves[key]

    def gemm_efficiency(self, dtype: str, flops_per_call: float,
                        gemm_pass: str = "forward") -> float:
        """Achieved / peak of a linear layer's product (forward, input_grad, weight_grad) of
        this many FLOPs in this precision."""
        return self.curve(curve_key("gemm", dtype, gemm_pass)).at(flops_per_call)

    def gemm_time_s(self, dtype: str, m: int, k: int, n: int,
                    gemm_pass: str = "forward") -> float:
        """Predicted seconds of one (m x k) @ (k x n) product of this pass."""
        flops = gemm_flops(m, k, n)
        eff = self.gemm_efficiency(dtype, flops, gemm_pass)
        return flops / (eff * self.peaks_flops_per_s[dtype])

    def attention_key(self, dtype: str, direction: str, head_dim: int) -> str:
        """The attention curve measured at the head size nearest to `head_dim`."""
        prefix = curve_key("attention", dtype, direction, "d")
        dims = [int(k[len(prefix):]) for k in self.curves if k.startswith(prefix)]
        if not dims:
            raise ConfigError("profile", f"has no attention curve for {dtype} {direction}",
                              ", ".join(sorted(self.curves)))
        return prefix + str(min(dims, key=lambda d: (abs(d - head_dim), d)))

    def attention_efficiency(self, dtype: str, direction: str, seq: int, head_dim: int) -> float:
        """Achieved / peak of fused causal attention at this sequence length."""
        return self.curve(self.attention_key(dtype, direction, head_dim)).at(seq)

    def attention_time_s(self, dtype: str, direction: str, batch: int, heads: int, seq: int,
                         head_dim: int) -> float:
        """Predicted seconds of one attention call (FLOPs as analytics.kernels counts them)."""
        flops = attention_flops(batch, heads, seq, head_dim, direction)
        eff = self.attention_efficiency(dtype, direction, seq, head_dim)
        return flops / (eff * self.peaks_flops_per_s[dtype])

    def memory_bytes_per_s(self, op: str, bytes_per_call: float) -> float:
        """Bandwidth of a streaming op ('copy', 'adamw') moving this many bytes."""
        return self.curve(curve_key("memory", op)).at(bytes_per_call)

    def has(self, key: str) -> bool:
        """Whether the profile measured this curve."""
        return key in self.curves

    def bytes_time_s(self, key: str, n_bytes: float) -> float:
        """Seconds of a call moving `n_bytes` on a bytes/s curve, read at that size."""
        return n_bytes / self.curve(key).at(n_bytes)

    def loss_time_s(self, dtype: str, tokens: int, vocab: int) -> float:
        """Cross-entropy over (tokens x vocab) logits of `dtype`, forward and backward."""
        return self.bytes_time_s(curve_key("loss", dtype),
                                 loss_bytes(tokens, vocab, BYTES_PER_VALUE[dtype]))

    def embedding_time_s(self, tokens: int, rows: int, width: int, tied: bool) -> float:
        """An fp32 embedding's gather and gradient (a tied table's head gradient added)."""
        return self.bytes_time_s(curve_key("embedding", "fp32"),
                                 embedding_bytes(tokens, rows, width, tied))

    def optimizer_time_s(self, n_params: float) -> float:
        """The train loop's update over n parameters: gradient norm, clip, AdamW."""
        return self.bytes_time_s(curve_key("optimizer", "adamw"), optimizer_bytes(n_params))

    def block_key(self, dtype: str, phase: str, cfg: ModelConfig, seq: int) -> str:
        """The curve of measured whole layers of this shape, phase and precision."""
        return curve_key("block", dtype, phase, block_shape(cfg, seq))

    def bus_bytes_per_s(self, op: str, message_bytes: float) -> float:
        """Bus bandwidth of a collective at this message size."""
        return self.curve(curve_key("collective", op)).at(message_bytes)

    def collective_time_s(self, op: str, message_bytes: float, ranks: int | None = None
                          ) -> float:
        """Predicted seconds of one collective: message over the algorithm bandwidth, the
        interpolated bus bandwidth over the bus factor of `ranks` (default: the ranks measured;
        busbw is what nccl-tests makes comparable across rank counts), and never less than the
        measured latency."""
        ranks = ranks or self.collective_ranks or 2
        algbw = self.bus_bytes_per_s(op, message_bytes) / bus_factor(op, ranks)
        return max(self.latency_s.get(op, 0.0), message_bytes / algbw)


def reference_peaks(points: list[Point], given: dict[str, tuple[float | None, str]]
                    ) -> tuple[dict[str, float], dict[str, str]]:
    """Each precision's peak: the one given (a datasheet's dense peak, a measured GEMM peak)
    with its label, else the fastest GEMM of these points (efficiencies are then relative to
    this machine's best call)."""
    peaks, labels = {}, {}
    dtypes = {p.dtype for p in points if p.op in EFFICIENCY_OPS}
    for dtype in sorted(dtypes):
        value, label = given.get(dtype, (None, ""))
        gemms = [p.rate_per_s for p in points if p.op == "gemm" and p.dtype == dtype]
        if value:
            peaks[dtype], labels[dtype] = value, label
        elif gemms:
            peaks[dtype], labels[dtype] = max(gemms), "fastest GEMM of this profile"
    return peaks, labels


def build_curves(points: list[Point], peaks: dict[str, float]) -> dict[str, Curve]:
    """One curve per key: efficiency for GEMM and attention points (their precision's peak
    known), bytes/s for memory and collective points."""
    pairs: dict[str, list[tuple[float, float]]] = {}
    for p in points:
        if p.op in EFFICIENCY_OPS:
            if p.dtype not in peaks:
                continue
            value = p.rate_per_s / peaks[p.dtype]
        else:
            value = p.rate_per_s
        pairs.setdefault(p.curve, []).append((p.size, value))
    return {key: make_curve(values) for key, values in sorted(pairs.items())}


def latencies_s(points: list[Point]) -> dict[str, float]:
    """Each collective's latency: its least median time over the message sizes measured (the
    smallest message's, unless a disturbed window made that one slower than a larger one)."""
    out: dict[str, float] = {}
    for p in points:
        if p.op == "collective":
            op = p.shape.get("collective", p.curve.split(":")[-1])
            out[op] = min(out.get(op, math.inf), p.time_s_median)
    return dict(sorted(out.items()))


def profile_from_metrics(metrics: ProfileMetrics, environment: dict[str, Any],
                         source: str) -> MachineProfile:
    """A profile from a 'profile' record's metrics (read as ProfileMetrics, config/records/) and
    environment."""
    points = [point_from_dict(d) for d in metrics.points or []]
    peaks = {k: float(v) for k, v in (metrics.peak_flops_per_s_by_dtype or {}).items() if v}
    return MachineProfile(
        device_type=str(environment.get("device_type", "")),
        device_name=str(environment.get("device_name", "")), source=source,
        peaks_flops_per_s=peaks, peak_labels=dict(metrics.peak_label_by_dtype or {}),
        curves=build_curves(points, peaks), latency_s=latencies_s(points),
        collective_ranks=metrics.collective_ranks,
        device_key=str(environment.get("device_spec_key") or ""))
