"""The single-device micro-benchmarks: a transformer layer's GEMMs, fused causal attention
forward and backward, and streaming memory ops (a copy, an AdamW step), each timed by
bench/timing.py (warm-up excluded, device synchronised, repetitions with their spread) and
counted by analytics/kernels.py."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from accelbench.analytics.kernels import (
    attention_bytes,
    attention_flops,
    gemm_bytes,
    gemm_flops,
    layer_gemm_shapes,
    pass_shape,
    stream_bytes,
)
from accelbench.analytics.machine_profile import Point, curve_key
from accelbench.bench.dtypes import parse_dtype
from accelbench.bench.gemm_peak import gemm_call
from accelbench.bench.timing import PhaseTimer, TimingStats, run_timed
from accelbench.parallel.optim import adamw
from accelbench.workloads.calibrate.options import FP32_BYTES, CalibrateSpec


def make_point(op: str, curve: str, label: str, dtype: str, size: float, work: float,
               stats: TimingStats, shape: dict) -> Point:
    """A timed call as a profile point."""
    return Point(op, curve, label, dtype, float(size), float(work), stats.median_s, stats.min_s,
                 stats.max_s, stats.iqr_s, stats.count, shape)


def time_call(call: Callable[[], object], device: torch.device, spec: CalibrateSpec
              ) -> TimingStats:
    """One call timed spec.repeats times after spec.warmup untimed calls."""
    def step(timer: PhaseTimer) -> None:
        with timer.phase("call"):
            call()

    return run_timed(step, device, spec.warmup, spec.repeats)["call"]


# The memory layout autograd runs each pass of nn.Linear in (bench.peak.GEMM_KERNELS): x @ w.T
# forward, dy @ w for the input gradient, dy.T @ x for the weight gradient.
PASS_KERNEL = {"forward": "nt", "input_grad": "nn", "weight_grad": "tn"}


def measure_gemms(spec: CalibrateSpec, device: torch.device, dtype: str) -> list[Point]:
    """The layer's GEMMs at each token count, each pass in its own layout and curve."""
    points, torch_dtype = [], parse_dtype(dtype)
    for tokens in spec.tokens:
        for name, fm, fk, fn in layer_gemm_shapes(spec.model, tokens):
            for gemm_pass in spec.gemm_passes:
                m, k, n = pass_shape(gemm_pass, fm, fk, fn)
                call = gemm_call(device, torch_dtype, PASS_KERNEL[gemm_pass], m, k, n)
                stats = time_call(call, device, spec)
                flops = gemm_flops(m, k, n)
                shape = {"m": m, "k": k, "n": n, "layer_gemm": name, "pass": gemm_pass,
                         "tokens": tokens,
                         "bytes": gemm_bytes(m, k, n, torch_dtype.itemsize)}
                points.append(make_point("gemm", curve_key("gemm", dtype, gemm_pass),
                                         f"{name} {gemm_pass} {m}x{k}x{n}", dtype, flops,
                                         flops, stats, shape))
    return points


def _attention_stats(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, device: torch.device,
                     spec: CalibrateSpec) -> dict[str, TimingStats]:
    """Causal SDPA forward and its backward, each its own phase of one repetition."""
    grad = torch.randn_like(q)

    def step(timer: PhaseTimer) -> None:
        for t in (q, k, v):
            t.grad = None
        with timer.phase("forward"):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with timer.phase("backward"):
            out.backward(grad)

    return run_timed(step, device, spec.warmup, spec.repeats)


def measure_attention(spec: CalibrateSpec, device: torch.device, dtype: str) -> list[Point]:
    """Fused causal attention, batch 1 with the model's heads, at each head size and sequence;
    FLOPs over the full seq x seq scores (analytics/kernels.py)."""
    points, heads = [], spec.model.n_head
    for head_dim in spec.head_dims:
        for seq in spec.seqs:
            q, k, v = (torch.randn(1, heads, seq, head_dim, device=device,
                                   dtype=parse_dtype(dtype), requires_grad=True)
                       for _ in range(3))
            stats = _attention_stats(q, k, v, device, spec)
            for direction in ("forward", "backward"):
                flops = attention_flops(1, heads, seq, head_dim, direction)
                shape = {"batch": 1, "heads": heads, "seq": seq, "head_dim": head_dim,
                         "causal": True, "direction": direction,
                         "bytes": attention_bytes(1, heads, seq, head_dim, q.element_size(),
                                                  direction)}
                points.append(make_point(
                    "attention", curve_key("attention", dtype, direction, f"d{head_dim}"),
                    f"{direction} s={seq} d={head_dim}", dtype, seq, flops, stats[direction],
                    shape))
    return points


def _stream_call(op: str, numel: int, device: torch.device) -> tuple[Callable[[], object], str]:
    """The streaming op on fp32 buffers of `numel` elements, and the kernel that runs."""
    if op == "copy":
        src = torch.randn(numel, device=device)
        dst = torch.empty_like(src)
        return (lambda: dst.copy_(src)), "copy_"
    param = torch.nn.Parameter(torch.randn(numel, device=device))
    param.grad = torch.randn_like(param)
    optimizer, kernel = adamw([{"params": [param]}], lr=1e-3)
    return optimizer.step, f"AdamW ({kernel})"


def measure_memory(spec: CalibrateSpec, device: torch.device) -> list[Point]:
    """Each streaming op at each buffer size (the size of one fp32 tensor)."""
    points = []
    for op in spec.memory_ops:
        for size in spec.memory_bytes:
            numel = max(size // FP32_BYTES, 1)
            call, kernel = _stream_call(op, numel, device)
            stats = time_call(call, device, spec)
            moved = stream_bytes(op, numel, FP32_BYTES)
            points.append(make_point("memory", curve_key("memory", op),
                                     f"{op} {numel * FP32_BYTES} B", "fp32", moved, moved,
                                     stats, {"numel": numel, "kernel": kernel}))
    return points
