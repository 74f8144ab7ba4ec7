"""Faults the lifecycle tests inject into a launched rank (ACCELBENCH_TEST_FAULT); none else."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from accelbench.bench.train.steps import Heartbeat

TEST_FAULT_ENV = "ACCELBENCH_TEST_FAULT"
TEST_RELEASE_FILE = "release"  # ends a `wait` fault (with_test_fault)


def stop_before_first_beat(rank: int) -> None:
    """The test fault ACCELBENCH_TEST_FAULT=stop:<rank>:before: this rank stops itself (SIGSTOP)
    before its first heartbeat (tests/dist/test_lifecycle.py). Unset: nothing."""
    if os.environ.get(TEST_FAULT_ENV, "") == f"stop:{rank}:before":
        os.kill(os.getpid(), signal.SIGSTOP)


def with_test_fault(beat: Heartbeat, rank: int, folder: Path | None = None) -> Heartbeat:
    """The heartbeat, with the fault tests inject (tests/dist/test_lifecycle.py) where
    ACCELBENCH_TEST_FAULT=<action>:<rank>:<step or phase>[:<n>] names this rank: at its first
    (or n-th: a later cell's) heartbeat of that step (or phase), `stop` (SIGSTOP itself), `kill`
    (SIGKILL itself), `raise` (RuntimeError('boom')), `hold` (sleep 120 s) or `wait` (until the
    test creates the file <cell folder>/release, at most 120 s: a cell that cannot finish before
    the test lets it). Unset (always, outside tests): no fault."""
    fault = os.environ.get(TEST_FAULT_ENV, "").split(":")
    if len(fault) not in (3, 4) or fault[1] != str(rank):
        return beat
    action, when, nth = fault[0], fault[2], int(fault[3]) if len(fault) == 4 else 1
    seen = []

    def faulty(step: int, phase: str) -> None:
        beat(step, phase)
        if when not in (str(step), phase):
            return
        seen.append(True)
        if len(seen) != nth:
            return
        if action in ("stop", "kill"):
            os.kill(os.getpid(), signal.SIGSTOP if action == "stop" else signal.SIGKILL)
        elif action == "raise":
            raise RuntimeError("boom")
        elif action == "hold":
            time.sleep(120)
        elif action == "wait":
            deadline = time.monotonic() + 120
            release = (folder or Path.cwd()) / TEST_RELEASE_FILE  # a group: the launch's folder
            while not release.exists() and time.monotonic() < deadline:
                time.sleep(0.05)

    return faulty
