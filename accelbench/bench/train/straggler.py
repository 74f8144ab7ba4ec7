"""A rank's own compute in each step, for naming a slow rank (analytics/straggler.py), and the
test-only delay that makes one rank slow.

On a CPU device the compute of a step's forward and backward is the step loop thread's CPU
time over them: a rank blocked in a gloo collective, waiting for a peer, or descheduled by the
OS uses none, so what it measures is the rank's own work (torch's CPU kernels and its own
collective calls' host work). The step's wall time less that is its waiting. An
accelerator's kernels run asynchronously, so host CPU time says nothing of them: there the
compute is not measured (None) and no rank is named; docs/gpu.md lists that path as not built.

ACCELBENCH_TEST_SLOW_RANK="RANK:FRACTION" (tests only) makes global rank RANK spin on the CPU
for FRACTION times its previous step's compute (the spin left out) before each step's
forward, as a rank with a processor slower by that fraction would.
"""

from __future__ import annotations

import os
import time

import torch

TEST_DELAY_ENV = "ACCELBENCH_TEST_SLOW_RANK"


def measures_compute(device: torch.device) -> bool:
    """Whether a step's compute can be read from the host's CPU time on this device."""
    return device.type == "cpu"


def compute_clock() -> float:
    """This thread's CPU seconds so far: the step loop's thread runs the forward, the backward
    (CPU autograd runs in the calling thread) and, with one intra-op thread a rank, every
    kernel; it blocks in a collective's wait. The process's CPU time would also count gloo's
    own threads, which poll while they wait for a peer."""
    return time.thread_time()


def test_delay_fraction(rank: int, env: dict[str, str] | None = None) -> float:
    """The fraction of its compute this rank is slowed by (0 unless the test variable names
    it); one line naming the variable when it is malformed."""
    text = (os.environ if env is None else env).get(TEST_DELAY_ENV, "")
    if not text:
        return 0.0
    who, _, fraction = text.partition(":")
    try:
        target, share = int(who), float(fraction)
    except ValueError as err:
        raise ValueError(f"{TEST_DELAY_ENV} must be RANK:FRACTION, e.g. 1:0.3, "
                         f"got {text!r}") from err
    return share if target == rank else 0.0


def spin(seconds: float) -> None:
    """Busy the CPU for `seconds` of its time (a sleep would not count as compute)."""
    end = compute_clock() + seconds
    while compute_clock() < end:
        pass

