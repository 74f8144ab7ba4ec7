"""What every check probe takes, raises and returns, and the helpers probes share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


class NotHere(Exception):  # noqa: N818 - a result ('unavailable'), not an error
    """The feature does not exist on this device or install; the message says why."""


@dataclass(frozen=True)
class CheckSettings:
    """The device a check runs on and its sizes (small on a CPU, the paper's head on a GPU)."""

    device: torch.device
    matmul_n: int = 256
    matmul_repeats: int = 3
    attention_shape: tuple[int, int, int, int] = (1, 4, 256, 64)  # batch, heads, seq, head
    compile_backend: str = "inductor"
    energy_window_s: float = 0.5


Found = tuple[str, dict[str, Any]]
Probe = Callable[[CheckSettings], Found]


def sync_device(device: torch.device) -> None:
    """Wait for the device (hardware.device)."""
    from accelbench.hardware import device as devices

    devices.synchronize(device)


def timed_s(s: CheckSettings, work: Callable[[], Any], repeats: int) -> float:
    """The median seconds of `work` after one untimed call, timed by the runner's run_timed
    (events on accelerators, the device synchronised at the window's edges)."""
    from accelbench.bench.timing import PhaseTimer, run_timed

    def step(timer: PhaseTimer) -> None:
        with timer.phase("work"):
            work()

    return run_timed(step, s.device, warmup=1, repeats=repeats)["work"].median_s


def first_line(err: BaseException) -> str:
    """An exception as one short line."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:200] if text else ''}"
