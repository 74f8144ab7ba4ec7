"""Starting ranks: torchrun on this machine with a deadline, and sbatch scripts for clusters.

launch_torchrun runs `python -m torch.distributed.run --standalone --nproc-per-node N <argv>`
in its own process group, so that on a timeout the whole tree (agent and ranks) is killed and the
caller goes on. Each rank's output is kept in a log folder (torchrun's --log-dir with
--redirects/--tee), from which the failed rank's error text is returned.
"""

from __future__ import annotations

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


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGTERM the launch's process group, then SIGKILL what is left after a grace period."""
    for sig, wait_s in ((signal.SIGTERM, _KILL_GRACE_S), (signal.SIGKILL, _KILL_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def launch_torchrun(nproc: int, argv: list[str], timeout_s: float,
                    env: dict[str, str] | None = None, cwd: str | None = None) -> LaunchResult:
    """Run argv (a script path or ['-m', module, ...]) on nproc local ranks under torchrun.

    Never blocks longer than timeout_s (plus a few seconds to kill): a dead rank ends the launch
    through torchrun, a hung one through the deadline. The result names the failed rank and
    carries its error text where torchrun reports one.
    """
    with tempfile.TemporaryDirectory(prefix="accelbench-torchrun-") as log_dir:
        cmd = torchrun_argv(nproc, argv, log_dir)
        started = time.perf_counter()
        with tempfile.TemporaryFile("w+") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                    env={**os.environ, **(env or {})}, start_new_session=True)
            try:
                code: int | None = proc.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                _kill_tree(proc)
                code, timed_out = None, True
            out.seek(0)
            output = out.read()
        wall_s = time.perf_counter() - started
        logs = read_rank_logs(Path(log_dir))
    return _result(code, timed_out, wall_s, output, logs, timeout_s)


def _result(code: int | None, timed_out: bool, wall_s: float, output: str,
            logs: dict[int, str], timeout_s: float) -> LaunchResult:
    """Name the failed rank and its error from torchrun's failure report and the rank logs."""
    result = LaunchResult(code, timed_out, wall_s, output[-_TAIL_CHARS:], rank_logs=logs)
    if timed_out:
        result.error = (f"timed out after {timeout_s:.0f} s (a rank hung or is too slow); "
                        "all ranks killed")
        return result
    if code == 0:
        return result
    result.failed_rank = failed_rank_from_output(output)
    text = logs.get(result.failed_rank, "") if result.failed_rank is not None else ""
    result.error = (text or output)[-_TAIL_CHARS:].strip()
    return result


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
