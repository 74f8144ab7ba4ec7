"""A rank's own compute in each step, for naming a slow rank (analytics/slow_rank.py), and the
test-only delay that makes one rank slow.

On a CPU device the compute of a step's forward and backward is the step loop thread's user
CPU time over them: a rank blocked in a gloo collective, waiting for a peer, or descheduled by
the OS uses none, so what it measures is the rank's own work (torch's CPU kernels and its own
collective calls' host work). Not its kernel time: that is mostly the page faults of the
memory malloc maps afresh each step, which differ between processes doing the same work (on
a 2-core EPYC, gpt2-tiny at dp=2: 44,000-88,000 faults a step and 0.07-0.14 s of kernel time
against 0.16 s of user time, and identical ranks differed by 10-25% in user + kernel time
while their user times agreed within a few per cent; docs/metrics.md). Its waiting is the time
its thread was blocked, neither running nor queued for a processor (`blocked_clock`): the
collectives' waits, timed by the kernel around them, without the time the machine's load kept
it off a processor (which the step's wall time less its compute would count). An
accelerator's kernels run asynchronously, so host CPU time says nothing of them: there the
compute is not measured (None) and no rank is named; docs/gpu.md lists that path as not built.

ACCELBENCH_TEST_SLOW_RANK="RANK:FRACTION" (tests only) makes global rank RANK spin on the CPU
for FRACTION times its previous step's compute (the spin left out) before each step's
forward, as a rank with a processor slower by that fraction would.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

import torch

TEST_DELAY_ENV = "ACCELBENCH_TEST_SLOW_RANK"
_THREAD_USAGE = getattr(resource, "RUSAGE_THREAD", None)  # Linux only
_SCHEDSTAT = Path("/proc/thread-self/schedstat")  # run, run-queue (ns) and slices: Linux


def measures_compute(device: torch.device) -> bool:
    """Whether a step's compute can be read from the host's CPU time on this device."""
    return device.type == "cpu"


def compute_clock() -> float:
    """This thread's user CPU seconds so far: the step loop's thread runs the forward, the
    backward (CPU autograd runs in the calling thread) and, with one intra-op thread a rank,
    every kernel; it blocks in a collective's wait. The process's CPU time would also count
    gloo's own threads; the thread's kernel time, its page faults (module docstring). Linux
    splits a thread's CPU time into user and kernel by its clock ticks (4 ms at 250 Hz), so a
    step's share is sampled: the comparison pairs steps and takes their median
    (analytics/slow_rank.py). Elsewhere (no RUSAGE_THREAD): the thread's whole CPU time."""
    if _THREAD_USAGE is None:
        return time.thread_time()
    return resource.getrusage(_THREAD_USAGE).ru_utime


def blocked_clock() -> float | None:
    """Seconds so far that this thread was neither running nor waiting for a processor, up to
    a constant: the wall clock less the kernel's run and run-queue times of the thread
    (/proc/thread-self/schedstat, Linux). Its difference over a step is the time the step loop
    was blocked: waiting in a collective (gloo's waits sleep) or for its data, with the time it
    was descheduled by the machine's load left out. None where the kernel does not say."""
    try:
        run_ns, queued_ns, _ = _SCHEDSTAT.read_text().split()
    except (OSError, ValueError):
        return None
    return time.perf_counter() - (int(run_ns) + int(queued_ns)) / 1e9


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
    """Busy the CPU for `seconds` of its compute (a sleep would not count), reading the clock
    every 10,000 loops so that its system calls stay a small share of the spin."""
    end = compute_clock() + seconds
    while compute_clock() < end:
        for _ in range(10_000):
            pass

