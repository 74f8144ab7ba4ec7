"""The peak a utilisation is divided by: the datasheet's dense peak, else a measured GEMM peak."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch

from accelbench.bench.dtypes import parse_dtype, set_tf32
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


GEMM_KERNELS = ("nn", "nt", "tn")  # a @ b; nn.Linear's x @ w.T; its weight gradient's g.T @ x


def _gemm_call(device: torch.device, dtype: torch.dtype, kernel: str, m: int, k: int,
               cols: int) -> Callable[[], torch.Tensor]:
    """One (m x k) @ (k x cols) product in the memory layout `kernel` names.

    The layouts run different code on some devices (bf16 on an AVX2 CPU: x @ w.T, the layout of
    every nn.Linear forward, is ~10x faster than a plain a @ b), so a peak measured on one
    layout alone under-reads what the model's own matmuls reach and gives MFUs above 100%.
    """
    if kernel == "nn":
        a, b = (torch.randn(m, k, device=device, dtype=dtype),
                torch.randn(k, cols, device=device, dtype=dtype))
        return lambda: torch.mm(a, b)
    if kernel == "nt":
        x, w = (torch.randn(m, k, device=device, dtype=dtype),
                torch.randn(cols, k, device=device, dtype=dtype))
        return lambda: torch.nn.functional.linear(x, w)
    g, x = (torch.randn(k, m, device=device, dtype=dtype),
            torch.randn(k, cols, device=device, dtype=dtype))
    return lambda: torch.mm(g.t(), x)


def _gemm_flops_per_s(device: torch.device, dtype: torch.dtype, kernel: str,
                      shape: tuple[int, int, int], repeats: int = 5, warmup: int = 2) -> float:
    """Best FLOP/s of one GEMM layout and (m, k, n) shape over `repeats` timed calls."""
    call = _gemm_call(device, dtype, kernel, *shape)

    def step(timer: PhaseTimer) -> None:
        with timer.phase("gemm"):
            call()

    best_s = run_timed(step, device, warmup=warmup, repeats=repeats)["gemm"].min_s
    return 2.0 * shape[0] * shape[1] * shape[2] / best_s


@cache
def fastest_layout(device_str: str, dtype_name: str, tf32: bool) -> str:
    """The GEMM_KERNELS layout this device runs fastest in this dtype, from warmed 256^3
    products (cheap even where a slow layout is emulated; the peak then measures this one)."""
    device = torch.device(device_str)
    set_tf32(device, tf32)
    dtype = parse_dtype(dtype_name)
    rates = {kernel: _gemm_flops_per_s(device, dtype, kernel, (256, 256, 256), repeats=3,
                                       warmup=1) for kernel in GEMM_KERNELS}
    return max(rates, key=rates.__getitem__)


@cache
def measured_gemm_flops_per_s(device_str: str, dtype_name: str, n: int, tf32: bool) -> float:
    """Best FLOP/s in this dtype: the fastest layout over the shapes of gemm_shapes(n).
    A peak, not a mean."""
    device = torch.device(device_str)
    set_tf32(device, tf32)
    kernel = fastest_layout(device_str, dtype_name, tf32)
    dtype = parse_dtype(dtype_name)
    return max(_gemm_flops_per_s(device, dtype, kernel, shape) for shape in gemm_shapes(n))


def _fitting_gemm_size(device: torch.device, dtype: str, tf32: bool) -> int:
    """Largest size up to gemm_size whose largest GEMM (4 n^3 multiply-adds) takes under 0.2 s
    in the fastest layout, from a warmed probe (a cold one picked n = 512 or 1024 at random)."""
    kernel = fastest_layout(str(device), dtype, tf32)
    n = gemm_size(device)
    while n > 128:
        rate = _gemm_flops_per_s(device, parse_dtype(dtype), kernel, (n, n, n), repeats=2,
                                 warmup=1)
        if 8.0 * n**3 / rate < 0.2:
            break
        n //= 2
    return n


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
