"""One timed comparison for the layer and model benchmarks: our step and the peer's,
alternated so that drift on a shared machine hits both alike, and the lines that report them."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch

from accelbench.bench.timing import PhaseTimer, summarize, synchronize
from accelbench.hardware.detect import device_name

Step = Callable[[PhaseTimer], None]  # one step, timed under the phase "step"


def alternate(ours: Step, theirs: Step, device: torch.device, warmup: int,
              repeats: int) -> tuple[list[float], list[float]]:
    """Step times in seconds of each side after `warmup` untimed steps of both."""
    idle = PhaseTimer(device, enabled=False)
    for _ in range(warmup):
        ours(idle)
        theirs(idle)
    synchronize(device)
    t_ours, t_theirs = PhaseTimer(device), PhaseTimer(device)
    for _ in range(repeats):
        ours(t_ours)
        theirs(t_theirs)
    return t_ours.times_s()["step"], t_theirs.times_s()["step"]


def report(device: torch.device, what: str, a: list[float], b: list[float]) -> None:
    """The device, what ran, each side's median step and the paired time ratio ours/theirs."""
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    sa, sb = summarize(a), summarize(b)
    print(f"device: {device_name(device)} ({device}), torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}")
    print(what)
    print(f"ours   median {sa.median_s * 1e3:8.1f} ms  (min {sa.min_s * 1e3:.1f}, "
          f"max {sa.max_s * 1e3:.1f})")
    print(f"theirs median {sb.median_s * 1e3:8.1f} ms  (min {sb.min_s * 1e3:.1f}, "
          f"max {sb.max_s * 1e3:.1f})")
    print(f"ratio ours/theirs: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); target <= 1.0")
