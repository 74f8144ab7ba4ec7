"""The peak a utilisation is divided by: the datasheet's dense peak, else a measured GEMM peak."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch

from accelbench.bench.dtypes import parse_dtype
from accelbench.bench.timing import PhaseTimer, run_timed
from accelbench.hardware.specs import DeviceSpec, peak_precision


@dataclass(frozen=True)
class Peak:
    """A peak FLOP/s with where it came from, so every MFU says what it was divided by."""

    flops_per_s: float | None
    precision: str
    label: str  # "datasheet dense (<key>)", "measured peak (GEMM n=...)" or "none"


def gemm_size(device: torch.device) -> int:
    """GEMM size large enough to reach the device's plateau without a long run."""
    return 8192 if device.type == "cuda" else 1024


def gemm_shapes(n: int) -> tuple[tuple[int, int, int], ...]:
    """(m, k, n) shapes tried: square, and the 1:4 shapes of a transformer MLP, whose rate on
    CPUs exceeds the square one's (a square-only "peak" gave block MFUs above 100%)."""
    return ((n, n, n), (n, n, 4 * n), (n, 4 * n, n))


def _gemm_flops_per_s(device: torch.device, dtype: torch.dtype, m: int, k: int,
                      cols: int) -> float:
    """Best FLOP/s of one (m x k) @ (k x cols) matmul over 10 timed repetitions."""
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, cols, device=device, dtype=dtype)

    def step(timer: PhaseTimer) -> None:
        with timer.phase("gemm"):
            torch.mm(a, b)

    return 2.0 * m * k * cols / run_timed(step, device, warmup=3, repeats=10)["gemm"].min_s


@cache
def measured_gemm_flops_per_s(device_str: str, dtype_name: str, n: int, tf32: bool) -> float:
    """Best FLOP/s over the shapes of gemm_shapes(n) in this dtype: a peak, not a mean."""
    device = torch.device(device_str)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
    dtype = parse_dtype(dtype_name)
    return max(_gemm_flops_per_s(device, dtype, *shape) for shape in gemm_shapes(n))


def _fitting_gemm_size(device: torch.device, dtype: str, tf32: bool) -> int:
    """Largest size up to gemm_size whose largest GEMM (4 n^3 multiply-adds) takes under 0.2 s
    (slow dtypes on CPUs)."""
    n = gemm_size(device)
    while n > 128:
        one_call_s = 8.0 * n**3 / _quick_flops_per_s(str(device), dtype, n, tf32)
        if one_call_s < 0.2:
            break
        n //= 2
    return n


@cache
def _quick_flops_per_s(device_str: str, dtype_name: str, n: int, tf32: bool) -> float:
    """One untimed-warm-up probe of the GEMM rate, to size the real measurement."""
    device = torch.device(device_str)
    a = torch.randn(n, n, device=device, dtype=parse_dtype(dtype_name))

    def step(timer: PhaseTimer) -> None:
        with timer.phase("gemm"):
            torch.mm(a, a)

    return 2.0 * n**3 / run_timed(step, device, warmup=0, repeats=1)["gemm"].min_s


def resolve_peak(spec: DeviceSpec | None, device: torch.device, dtype: str, tf32: bool,
                 measure: bool = True) -> Peak:
    """Datasheet dense peak for the precision that ran; else a measured GEMM peak, labelled."""
    precision = peak_precision(dtype, tf32 and device.type == "cuda")
    if spec is not None:
        flops = spec.peak_flops_per_s(precision)
        if flops:
            return Peak(flops, precision, f"datasheet dense ({spec.key})")
    if not measure:
        return Peak(None, precision, "none")
    n = _fitting_gemm_size(device, dtype, tf32)
    flops = measured_gemm_flops_per_s(str(device), dtype, n, tf32)
    return Peak(flops, precision, f"measured peak (GEMM n={n})")
