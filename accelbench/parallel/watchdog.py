"""Heartbeats of launched ranks and the launcher's progress watchdog.

Each rank writes what it is doing (step and phase: "step 3: forward/backward", "step 3:
optimizer", "step 3: loss all-reduce") into its own small file, in place, at every phase: one
`pwrite` of a fixed-size record, so the cost inside a timed step is a few microseconds. The
launcher reads the files while it waits. A cell is hung when, for `hang_timeout_s`, no rank
made progress: no heartbeat advanced and no rank's processes used CPU (a rank busy in a long
phase, say the first step of a large model on a CPU, is working, not hung; one blocked in a
collective or stopped uses none). The rank that stopped first, the one whose progress is
oldest, is named with its last heartbeat.

A rank that has not written a heartbeat yet (it may still be importing torch) is judged from the
launch's start by its process's CPU use: one stopped or blocked before its first heartbeat is
found as a hang within hang_timeout_s of the last progress of any rank, as one stopped later is.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from accelbench.parallel.procs import own_cpu_s, proc_state, tree_cpu_s, worker_pids

HEARTBEAT_DIR = "heartbeat"
_RECORD_BYTES = 512
BUSY_CPU_FRACTION = 0.1  # CPU seconds per wall second above which a rank counts as working
_BUSY_MIN_S = 1.0  # look at CPU use over at least this long


class HeartbeatWriter:
    """A rank's heartbeat file (<folder>/rank-<r>), rewritten in place at every phase."""

    def __init__(self, folder: Path, rank: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.rank, self.seq = rank, 0
        self._fd = os.open(folder / f"rank-{rank}", os.O_RDWR | os.O_CREAT, 0o644)

    def __call__(self, step: int, phase: str) -> None:
        """Record that this rank reached `phase` of `step` (1-based; 0 before the first)."""
        self.seq += 1
        record = json.dumps({"rank": self.rank, "pid": os.getpid(), "seq": self.seq,
                             "step": step, "phase": phase[:200], "time": time.time()})
        os.pwrite(self._fd, record.encode().ljust(_RECORD_BYTES), 0)

    def close(self) -> None:
        """Close the file (it stays: the launcher reads it)."""
        os.close(self._fd)


def read_heartbeats(folder: Path) -> dict[int, dict]:
    """Each rank's last heartbeat; a record caught mid-write is skipped until the next read."""
    beats: dict[int, dict] = {}
    for path in folder.glob("rank-*"):
        try:
            beat = json.loads(path.read_bytes().decode().strip() or "null")
        except (OSError, ValueError):
            continue
        if isinstance(beat, dict) and "seq" in beat:
            beats[int(beat["rank"])] = beat
    return beats


def describe(beat: dict) -> str:
    """'step 3: optimizer', or the phase alone before the first step."""
    return f"step {beat['step']}: {beat['phase']}" if beat.get("step") else str(beat["phase"])


@dataclass
class _Progress:
    seq: int  # its last heartbeat's (-1: none yet)
    at: float  # when (the launcher's monotonic clock) this rank last made progress
    cpu_s: float | None  # its processes' CPU seconds then
    beat: dict | None  # its last heartbeat (None: it has not written one)
    pid: int | None  # its process, where known


@dataclass(frozen=True)
class Hang:
    """What the watchdog found: the rank that stopped first and the full reason."""

    rank: int
    reason: str


class HangWatch:
    """Polled by the launcher; `check()` returns a Hang once no rank progressed for
    hang_timeout_s. A rank that has written no heartbeat yet is judged from the watch's start
    (the launch): its process (found below the torchrun agent, `agent_pid`) using CPU is
    progress (importing torch, say), one stopped or blocked is not; before its process exists,
    the agent's own CPU use counts for it (the agent is starting it)."""

    def __init__(self, folder: Path, nproc: int, hang_timeout_s: float,
                 agent_pid: int | None = None) -> None:
        self.folder, self.nproc, self.hang_timeout_s = folder, nproc, hang_timeout_s
        self.agent_pid = agent_pid
        self.started, self.started_wall = time.monotonic(), time.time()
        self.ranks: dict[int, _Progress] = {}
        self._pids: dict[int, int] = {}  # rank -> pid of the ranks found below the agent

    def check(self, now: float | None = None) -> Hang | None:
        """Read the heartbeats; a Hang when the cell has stopped progressing."""
        now = time.monotonic() if now is None else now
        for rank, beat in read_heartbeats(self.folder).items():
            self._update(rank, beat, now)
        silent = [r for r in range(self.nproc) if self.ranks.get(r, _NONE).beat is None]
        if self.agent_pid and any(r not in self._pids for r in silent):
            self._pids.update(worker_pids(self.agent_pid))
        for rank in silent:
            self._update_silent(rank, self._pids.get(rank), now)
        if any(now - p.at < self.hang_timeout_s for p in self.ranks.values()):
            return None
        order = sorted(self.ranks, key=self._suspicion)
        return Hang(order[0], self._reason(now, order))

    def _update(self, rank: int, beat: dict, now: float) -> None:
        known = self.ranks.get(rank)
        if known is None or beat["seq"] != known.seq:
            pid = int(beat["pid"])
            self.ranks[rank] = _Progress(beat["seq"], now, tree_cpu_s(pid), beat, pid)
            return
        self._busy(known, now, tree_cpu_s(known.pid) if known.pid else None)

    def _update_silent(self, rank: int, pid: int | None, now: float) -> None:
        """A rank with no heartbeat: progress since the launch only where its process (or,
        before it exists, the agent) uses CPU."""
        cpu_s = tree_cpu_s(pid) if pid else own_cpu_s(self.agent_pid)
        known = self.ranks.get(rank)
        if known is None or known.pid != pid:  # first seen, or its process found: a baseline
            at = self.started if known is None else known.at
            self.ranks[rank] = _Progress(-1, at, cpu_s, None, pid)
            return
        self._busy(known, now, cpu_s)

    @staticmethod
    def _busy(known: _Progress, now: float, cpu_s: float | None) -> None:
        """Working inside a long phase (CPU used since its last progress) is progress."""
        quiet_s = now - known.at
        if quiet_s < _BUSY_MIN_S or known.cpu_s is None or cpu_s is None:
            return
        if cpu_s - known.cpu_s >= BUSY_CPU_FRACTION * quiet_s:
            known.at, known.cpu_s = now, cpu_s

    def _suspicion(self, rank: int) -> tuple[bool, bool, float, int]:
        """Sort key, most suspect first: a stopped process or one in uninterruptible sleep,
        then a rank that never beat, then the oldest last heartbeat (the others went on until
        they waited for it)."""
        known = self.ranks[rank]
        state = process_state(known.pid) if known.pid else ""
        beat_time = float(known.beat["time"]) if known.beat else self.started_wall
        return (not state, known.beat is not None, beat_time, rank)

    def _reason(self, now: float, order: list[int]) -> str:
        """'hung: no rank made progress for S s (hang timeout T s); rank 1 (process stopped),
        last heartbeat 'step 2: forward/backward' S1 s before; rank 0, last heartbeat ...'; a
        rank that never beat: 'rank 1 (process stopped), no heartbeat in the S s since the
        launch'."""
        quiet = min(now - p.at for p in self.ranks.values())
        parts = [f"hung: no rank made progress for {quiet:.0f} s (hang timeout "
                 f"{self.hang_timeout_s:g} s)"]
        for rank in order:
            known = self.ranks[rank]
            state = process_state(known.pid) if known.pid else "process not found"
            head = f"rank {rank}{f' ({state})' if state else ''}"
            if known.beat is None:
                parts.append(f"{head}, no heartbeat in the {now - self.started:.0f} s since "
                             "the launch")
                continue
            ago = max(time.time() - float(known.beat["time"]), 0.0)
            parts.append(f"{head}, last heartbeat '{describe(known.beat)}' {ago:.1f} s before")
        return "; ".join(parts)


_NONE = _Progress(-1, 0.0, None, None, None)


def process_state(pid: int) -> str:
    """Why a process cannot progress, where /proc shows it: stopped, or in uninterruptible
    sleep (a driver or file system call that does not return); '' otherwise."""
    state = proc_state(pid)
    if state in ("T", "t"):
        return "process stopped"
    return "uninterruptible sleep" if state == "D" else ""
