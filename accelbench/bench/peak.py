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
    """Square GEMM size large enough to reach the device's plateau without a long run."""
    return 8192 if device.type == "cuda" else 2048


@cache
def measured_gemm_flops_per_s(device_str: str, dtype_name: str, n: int, tf32: bool) -> float:
    """Best FLOP/s of an n x n x n matmul in this dtype (max over repetitions: a peak)."""
    device = torch.device(device_str)
    dtype = parse_dtype(dtype_name)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)

    def step(timer: PhaseTimer) -> None:
        with timer.phase("gemm"):
            torch.mm(a, b)

    stats = run_timed(step, device, warmup=3, repeats=10)["gemm"]
    return 2.0 * n**3 / stats.min_s


def _fitting_gemm_size(device: torch.device, dtype: str, tf32: bool) -> int:
    """Largest size up to gemm_size whose one GEMM takes under 0.2 s (slow dtypes on CPUs)."""
    n = gemm_size(device)
    while n > 128:
        one_call_s = 2.0 * n**3 / _quick_flops_per_s(str(device), dtype, n, tf32)
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
