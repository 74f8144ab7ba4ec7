"""Where one training step's device time goes: torch.profiler over a few steps, the kernels
grouped by what they do (matmuls, attention, optimizer, loss, norms, copies, the rest) and the
most expensive kernels, per step. The gap between the step's wall time and the kernels' busy
time is time the device waited on the host. Used by harness_overhead.py --profile."""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Callable

import torch

from accelbench.bench.timing import synchronize

# Kernel name patterns, first match wins (cuBLAS on Hopper names its GEMMs nvjet_* / sm90_xmma).
CATEGORIES = (
    ("matmul", re.compile(r"gemm|gemv|xmma|cutlass|cublas|nvjet|matmul|addmm|\bmm\b|bmm", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|sdpa|cudnn", re.I)),
    ("optimizer", re.compile(r"adam|multi_tensor|foreach", re.I)),
    ("loss", re.compile(r"softmax|nll|cross_entropy", re.I)),
    ("norm", re.compile(r"layer_?norm|rms_?norm", re.I)),
    ("copy/cast", re.compile(r"copy|memcpy|memset|fill|cast|to_copy", re.I)),
)


def category(name: str) -> str:
    """The group a kernel (or CPU op) name belongs to."""
    found = (label for label, pattern in CATEGORIES if pattern.search(name))
    return next(found, "elementwise/other")


def device_times_us(prof: torch.profiler.profile, device: torch.device) -> dict[str, list[float]]:
    """Each kernel name's durations (µs): device-side events on an accelerator, each op's
    self time on a CPU (where no kernel events exist)."""
    times: dict[str, list[float]] = defaultdict(list)
    if device.type == "cpu":
        for avg in prof.key_averages():
            if avg.self_cpu_time_total > 0:
                times[avg.key] += [avg.self_cpu_time_total / avg.count] * avg.count
        return times
    from torch.autograd import DeviceType

    for event in prof.events():  # a user annotation (Optimizer.step#...) spans kernels
        if event.device_type != DeviceType.CPU and not getattr(event, "is_user_annotation",
                                                               False):
            times[event.name].append(event.time_range.elapsed_us())
    if not times:  # no device-side events listed: each op's own device time instead
        for avg in prof.key_averages():
            own_us = getattr(avg, "self_device_time_total", 0) or 0
            if own_us > 0:
                times[avg.key] += [own_us / avg.count] * avg.count
    return times


def print_profile(times: dict[str, list[float]], steps: int, wall_s: float, rows: int) -> None:
    """Per step: wall time, busy time, each category's share, the costliest kernels."""
    busy_ms = sum(sum(v) for v in times.values()) / 1e3 / steps
    wall_ms = wall_s * 1e3 / steps
    print(f"profile: {steps} step(s), wall {wall_ms:.1f} ms/step, kernels busy {busy_ms:.1f} "
          f"ms/step ({busy_ms / wall_ms:.0%} of the wall; the rest the device waited)")
    shares: dict[str, float] = defaultdict(float)
    for name, durations in times.items():
        shares[category(name)] += sum(durations) / 1e3 / steps
    for label, ms in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"  {label:<18} {ms:8.2f} ms/step  {ms / busy_ms:6.1%}")
    print(f"  top {rows} kernels (ms/step, launches/step, category):")
    ranked = sorted(times.items(), key=lambda kv: -sum(kv[1]))[:rows]
    for name, durations in ranked:
        short = name if len(name) <= 90 else name[:87] + "..."
        print(f"  {sum(durations) / 1e3 / steps:8.2f} {len(durations) / steps:6.0f}  "
              f"{category(name):<18} {short}")


def profile_steps(step: Callable[[], None], device: torch.device, steps: int = 2,
                  rows: int = 12) -> None:
    """Run `step` `steps` times under torch.profiler and print where the device time went."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    synchronize(device)
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        synchronize(device)
        wall_s = time.perf_counter() - start
    print_profile(device_times_us(prof, device), steps, wall_s, rows)
