"""Starting ranks: torchrun on this machine with a deadline, and sbatch scripts for clusters.

launch_torchrun runs `python -m torch.distributed.run --standalone --nproc-per-node N <argv>`
in its own process group. torchrun starts each worker in a session of its own, so on a timeout
every descendant of the agent is found in /proc and killed, not only the agent's group, and the
caller goes on. Each rank's output is kept in a log folder (torchrun's --log-dir with
--redirects/--tee), from which the failed rank's error text is returned.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ACCELBENCH_MODULE = ["-m", "accelbench.cli.main"]
_TAIL_CHARS = 4000
_KILL_GRACE_S = 5.0
_LAST_LINE_CHARS = 200


@dataclass
class LaunchResult:
    """What came of one torchrun launch."""

    returncode: int | None  # None when killed on timeout
    timed_out: bool
    wall_s: float
    output: str  # torchrun's combined stdout and stderr (tail)
    failed_rank: int | None = None
    error: str = ""  # the failed rank's error text, or why the launch was stopped
    rank_logs: dict[int, str] = field(default_factory=dict)  # rank -> tail of its stderr

    @property
    def ok(self) -> bool:
        """True when every rank exited with 0 in time."""
        return self.returncode == 0 and not self.timed_out


def torchrun_argv(nproc: int, argv: list[str], log_dir: str | None = None) -> list[str]:
    """The command line: this interpreter, torchrun standalone, per-rank logs, then argv."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", str(nproc)]
    if log_dir:
        cmd += ["--log-dir", log_dir, "--redirects", "3", "--tee", "3"]
    return cmd + list(argv)


def _proc_stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state letter, start time in clock ticks) from /proc/<pid>/stat, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the command name may hold spaces and ')'
    return int(fields[1]), fields[0], int(fields[19])


def descendants(root_pid: int) -> dict[int, int]:
    """Every live process below root_pid (pid -> start time), found by walking parent links in
    /proc: torchrun starts each worker in a session of its own, out of reach of killpg."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))) is not None:
            children.setdefault(stat[0], []).append((int(entry.name), stat[2]))
    found: dict[int, int] = {}
    todo = [root_pid]
    while todo:
        for pid, started in children.get(todo.pop(), []):
            if pid not in found:
                found[pid] = started
                todo.append(pid)
    return found


def _alive(pid: int, started: int) -> bool:
    """The same process (pid and start time) still exists and is not a zombie."""
    stat = _proc_stat(pid)
    return stat is not None and stat[2] == started and stat[1] not in "ZX"


def _signal_all(proc: subprocess.Popen, tree: dict[int, int], sig: signal.Signals) -> None:
    """sig to the agent's process group and to every process of the tree still alive."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
    for pid, started in tree.items():
        if _alive(pid, started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def _wait_gone(proc: subprocess.Popen, tree: dict[int, int], wait_s: float) -> bool:
    """Poll until the agent and every process of the tree have exited; False at wait_s."""
    deadline = time.monotonic() + wait_s
    while True:
        agent_done = proc.poll() is not None
        if agent_done and not any(_alive(p, s) for p, s in tree.items()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGTERM the agent and all its descendants (collected before signalling, since workers
    orphaned by the agent's death leave its tree), then SIGKILL whatever is left."""
    tree = descendants(proc.pid)
    _signal_all(proc, tree, signal.SIGTERM)
    if _wait_gone(proc, tree, _KILL_GRACE_S):
        return
    tree.update(descendants(proc.pid))  # anything the agent started meanwhile
    _signal_all(proc, tree, signal.SIGKILL)
    _wait_gone(proc, tree, _KILL_GRACE_S)


def launch_torchrun(nproc: int, argv: list[str], timeout_s: float,
                    env: dict[str, str] | None = None, cwd: str | None = None) -> LaunchResult:
    """Run argv (a script path or ['-m', module, ...]) on nproc local ranks under torchrun.

    Never blocks longer than timeout_s (plus a few seconds to kill): a dead rank ends the launch
    through torchrun, a hung one through the deadline, which kills the agent and every worker.
    The result names the failed rank and carries its error text where torchrun reports one.
    """
    with tempfile.TemporaryDirectory(prefix="accelbench-torchrun-") as log_dir:
        cmd = torchrun_argv(nproc, argv, log_dir)
        started = time.perf_counter()
        silent_s: dict[int, float] = {}
        with tempfile.TemporaryFile("w+") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                    env={**os.environ, **(env or {})}, start_new_session=True)
            try:
                code: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                silent_s = rank_silence_s(Path(log_dir))  # before the kill adds output
                _kill_tree(proc)
                code = None
            out.seek(0)
            output = out.read()
        wall_s = time.perf_counter() - started
        logs = read_rank_logs(Path(log_dir))
    if code is None:
        return _timeout_result(wall_s, output, logs, timeout_s, silent_s)
    return _result(code, wall_s, output, logs)


def _result(code: int, wall_s: float, output: str, logs: dict[int, str]) -> LaunchResult:
    """Name the failed rank and its error from torchrun's failure report and the rank logs."""
    result = LaunchResult(code, False, wall_s, output[-_TAIL_CHARS:], rank_logs=logs)
    if code == 0:
        return result
    result.failed_rank = failed_rank_from_output(output)
    text = logs.get(result.failed_rank, "") if result.failed_rank is not None else ""
    result.error = (text or output)[-_TAIL_CHARS:].strip()
    return result


def _timeout_result(wall_s: float, output: str, logs: dict[int, str], timeout_s: float,
                    silent_s: dict[int, float]) -> LaunchResult:
    """A launch ended by the deadline; its error says which rank went quiet first, and how."""
    result = LaunchResult(None, True, wall_s, output[-_TAIL_CHARS:], rank_logs=logs)
    result.error = timeout_reason(timeout_s, logs, silent_s)
    return result


def timeout_reason(timeout_s: float, logs: dict[int, str], silent_s: dict[int, float]) -> str:
    """'timed out after N s ...; rank r silent for S s, last line: ...' with the rank that
    stopped making progress (longest without output) first."""
    parts = [f"timed out after {timeout_s:.0f} s (a rank hung or is too slow); "
             "all ranks and their children killed"]
    for rank in sorted(set(logs) | set(silent_s), key=lambda r: -silent_s.get(r, 0.0)):
        lines = [line for line in logs.get(rank, "").splitlines() if line.strip()]
        last = lines[-1].strip()[-_LAST_LINE_CHARS:] if lines else "(no output)"
        quiet = f" silent for {silent_s[rank]:.1f} s," if rank in silent_s else ""
        parts.append(f"rank {rank}{quiet} last line: {last}")
    return "; ".join(parts)


def rank_silence_s(log_dir: Path) -> dict[int, float]:
    """Seconds since each local rank last wrote to its stdout or stderr log (torchrun's
    <run>/attempt_<n>/<rank>/ folders)."""
    now = time.time()
    latest: dict[int, float] = {}
    for path in log_dir.rglob("std*.log"):
        try:
            rank, mtime = int(path.parent.name), path.stat().st_mtime
        except (ValueError, OSError):
            continue
        latest[rank] = max(latest.get(rank, 0.0), mtime)
    return {rank: max(now - mtime, 0.0) for rank, mtime in latest.items()}


def failed_rank_from_output(output: str) -> int | None:
    """The root-cause rank of torchrun's ChildFailedError report ('rank : 1 (local_rank: 1)')."""
    section = output.split("Root Cause", 1)[-1]
    match = re.search(r"rank\s*:\s*(\d+)\s*\(local_rank", section)
    return int(match.group(1)) if match else None


def read_rank_logs(log_dir: Path) -> dict[int, str]:
    """Tail of each local rank's stderr.log under torchrun's log folder (layout varies by
    version: <run>/attempt_<n>/<rank>/stderr.log)."""
    logs: dict[int, str] = {}
    for path in sorted(log_dir.rglob("stderr.log")):
        try:
            rank = int(path.parent.name)
        except ValueError:
            continue
        logs[rank] = path.read_text(errors="replace")[-_TAIL_CHARS:]
    return logs


def sbatch_script(nodes: int, gpus_per_node: int, command: list[str] | str,
                  job_name: str = "accelbench", time_limit: str = "01:00:00",
                  partition: str | None = None, account: str | None = None,
                  port: int = 29500, extra_sbatch: list[str] | None = None) -> str:
    """A multi-node Slurm batch script: one srun task per node, each running torchrun with
    gpus_per_node ranks that meet at the first node through the c10d rendezvous."""
    args = command if isinstance(command, str) else shlex.join(command)
    lines = ["#!/bin/bash", f"#SBATCH --job-name={job_name}", f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1", f"#SBATCH --gpus-per-node={gpus_per_node}",
             f"#SBATCH --time={time_limit}"]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    lines += [f"#SBATCH {item}" for item in extra_sbatch or []]
    lines += [
        "set -euo pipefail",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"export MASTER_ADDR=$head_node MASTER_PORT={port}",
        "srun --kill-on-bad-exit=1 python -m torch.distributed.run \\",
        f"    --nnodes={nodes} --nproc-per-node={gpus_per_node} \\",
        "    --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT \\",
        "    --rdzv-id=$SLURM_JOB_ID \\",
        f"    {args}",
    ]
    return "\n".join(lines) + "\n"
