"""Starting ranks: torchrun on this machine, supervised (sbatch scripts: parallel/slurm.py).

launch_torchrun runs `python -m torch.distributed.run --standalone --nproc-per-node N <argv>`
through a small wrapper (this module's `agent` entry) that ties the torchrun agent to the
caller's life: the kernel sends the agent SIGTERM when the caller dies, even by SIGKILL
(PR_SET_PDEATHSIG), and the agent then stops its workers. While it waits, the caller ends the
launch early on three things, and always kills the whole tree then (torchrun starts each worker
in a session of its own, so every descendant is found in /proc, not only the agent's group):

- the deadline (`timeout_s`): a result with `timed_out`;
- the progress watchdog (`hang_timeout_s`, reading the ranks' heartbeats in the work folder,
  parallel/watchdog.py): `timed_out`, the stopped rank named with its last heartbeat;
- SIGINT or SIGTERM to the caller: a result with `interrupted` set to the signal.

A failed launch names the rank that caused it with ITS OWN error: the exception it wrote to the
work folder (`write_rank_error`, rank_files.py), or the signal that killed it from torchrun's
report, before the echoes of its peers ("Connection closed by peer" from the ranks it left
waiting; failure_cause.py).
"""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.parallel.failure_cause import agent_signal, root_cause, timeout_reason
from accelbench.parallel.procs import (
    Interrupted,
    alive,
    descendants,
    die_with_parent,
    signal_name,
    signals_raise,
    watch_parent,
)
from accelbench.parallel.rank_files import (
    ERRORS_DIR,
    TAIL_CHARS,
    rank_silence_s,
    read_rank_errors,
    read_rank_logs,
)
from accelbench.parallel.watchdog import HEARTBEAT_DIR, Hang, HangWatch, read_heartbeats

ACCELBENCH_MODULE = ["-m", "accelbench"]
LOGS_DIR = "logs"
_KILL_GRACE_S = 5.0
# On SIGINT/SIGTERM the cell is lost whatever its ranks do next: they get this long, then
# SIGKILL, so the command ends within about 2 s of the signal (torch's teardown in each rank and
# in the agent took 2-7 s on a loaded 2-core machine).
_INTERRUPT_GRACE_S = 0.3
_POLL_S = 0.2
AGENT_GRACE_S = 10.0  # an orphaned agent's clean shutdown may take this long, then SIGKILL


@dataclass
class LaunchResult:
    """What came of one torchrun launch."""

    returncode: int | None  # None when the launcher killed it (deadline, hang, signal)
    timed_out: bool  # the deadline or the hang watchdog ended it
    wall_s: float
    output: str  # torchrun's combined stdout and stderr (tail)
    failed_rank: int | None = None
    error: str = ""  # the failed rank's own error, or why the launch was stopped
    rank_logs: dict[int, str] = field(default_factory=dict)  # rank -> tail of its stderr
    interrupted: int | None = None  # SIGINT or SIGTERM that reached the caller

    @property
    def ok(self) -> bool:
        """True when every rank exited with 0 in time."""
        return self.returncode == 0 and not self.timed_out and self.interrupted is None


def torchrun_argv(nproc: int, argv: list[str], log_dir: str | None = None) -> list[str]:
    """The command line: this interpreter, torchrun standalone, per-rank logs, then argv."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", str(nproc)]
    if log_dir:
        cmd += ["--log-dir", log_dir, "--redirects", "3", "--tee", "3"]
    return cmd + list(argv)


def agent_argv(torchrun_cmd: list[str], parent_pid: int | None = None) -> list[str]:
    """The torchrun command run through this module's `agent` entry, tied to parent_pid."""
    args = torchrun_cmd[3:]  # after: python -m torch.distributed.run
    pid = os.getpid() if parent_pid is None else parent_pid
    return [sys.executable, "-m", __name__, "agent", str(pid), *args]


def agent_main(argv: list[str]) -> None:
    """The torchrun agent, tied to the process that launched it: SIGTERM from the kernel when
    that process dies (Linux), or from a thread that polls the parent id (elsewhere); on
    SIGTERM torchrun stops its workers and exits. Whatever is left AGENT_GRACE_S later (a
    wedged shutdown, a stopped worker) the thread SIGKILLs, the agent last."""
    parent = int(argv[0])
    tied = die_with_parent(signal.SIGTERM)
    if os.getppid() != parent:  # died before the kernel was asked
        sys.exit(1)
    # One SIGTERM only (torchrun's handler raises on each, and a second one during its shutdown
    # was seen to deadlock it), then SIGKILL for the agent and all below it if still there.
    watch_parent(parent, None if tied else signal.SIGTERM, kill_tree_after_s=AGENT_GRACE_S)
    sys.argv = ["torchrun", *argv[1:]]
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)


def _signal_all(proc: subprocess.Popen, tree: dict[int, int], sig: signal.Signals) -> None:
    """sig to the agent's process group and to every process of the tree still alive."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
    for pid, started in tree.items():
        if alive(pid, started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def _wait_gone(proc: subprocess.Popen, tree: dict[int, int], wait_s: float) -> bool:
    """Poll until the agent and every process of the tree have exited; False at wait_s."""
    deadline = time.monotonic() + wait_s
    while True:
        agent_done = proc.poll() is not None
        if agent_done and not any(alive(p, s) for p, s in tree.items()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _kill_tree(proc: subprocess.Popen, grace_s: float = _KILL_GRACE_S) -> None:
    """SIGTERM the agent and all its descendants (collected before signalling, since workers
    orphaned by the agent's death leave its tree), SIGCONT so that a stopped one gets it too,
    then SIGKILL whatever is left."""
    tree = descendants(proc.pid)
    _signal_all(proc, tree, signal.SIGTERM)
    _signal_all(proc, tree, signal.SIGCONT)
    if _wait_gone(proc, tree, grace_s):
        return
    tree.update(descendants(proc.pid))  # anything the agent started meanwhile
    _signal_all(proc, tree, signal.SIGKILL)
    _wait_gone(proc, tree, _KILL_GRACE_S)


@dataclass
class _Stop:
    """How the wait ended: the agent exited (code), or the launcher stopped it."""

    code: int | None = None
    deadline: bool = False
    silent_s: dict[int, float] = field(default_factory=dict)
    hang: Hang | None = None
    signum: int | None = None


def _supervise(proc: subprocess.Popen, timeout_s: float, watch: HangWatch | None,
               log_dir: Path) -> _Stop:
    """Wait for the agent; kill the tree at the deadline, on a hang, or on SIGINT/SIGTERM."""
    deadline = time.monotonic() + timeout_s
    with signals_raise():
        try:
            while True:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    return _Stop(code=proc.wait(timeout=_POLL_S))
                if time.monotonic() >= deadline:
                    silent_s = rank_silence_s(log_dir)  # before the kill adds output
                    _kill_tree(proc)
                    return _Stop(deadline=True, silent_s=silent_s)
                if watch is not None and (hang := watch.check()) is not None:
                    _kill_tree(proc)
                    return _Stop(hang=hang)
        except Interrupted as stop:
            _kill_tree(proc, _INTERRUPT_GRACE_S)
            return _Stop(signum=stop.signum)


@contextlib.contextmanager
def _work_folder(work_dir: Path | str | None) -> Iterator[Path]:
    """The caller's work folder (kept), or a temporary one removed at the end."""
    if work_dir is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
        yield Path(work_dir)
        return
    with tempfile.TemporaryDirectory(prefix="accelbench-torchrun-") as tmp:
        yield Path(tmp)


def launch_torchrun(nproc: int, argv: list[str], timeout_s: float,
                    env: dict[str, str] | None = None, cwd: str | None = None, *,
                    work_dir: Path | str | None = None,
                    hang_timeout_s: float | None = None) -> LaunchResult:
    """Run argv (a script path or ['-m', module, ...]) on nproc local ranks under torchrun.

    Never blocks longer than timeout_s (plus a few seconds to kill): a dead rank ends the launch
    through torchrun, a hung one through the watchdog (with `hang_timeout_s`: the ranks write
    heartbeats to <work_dir>/heartbeat) or the deadline, SIGINT/SIGTERM to this process through
    its handler; each kills the agent and every worker. Rank logs go to <work_dir>/logs and
    rank errors are read from <work_dir>/errors (a temporary folder without work_dir).
    """
    with _work_folder(work_dir) as folder:
        log_dir = folder / LOGS_DIR
        cmd = agent_argv(torchrun_argv(nproc, argv, str(log_dir)))
        started = time.perf_counter()
        with tempfile.TemporaryFile("w+") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                    env={**os.environ, **(env or {})}, start_new_session=True)
            watch = (HangWatch(folder / HEARTBEAT_DIR, nproc, hang_timeout_s, proc.pid)
                     if hang_timeout_s else None)
            stop = _supervise(proc, timeout_s, watch, log_dir)
            out.seek(0)
            output = out.read()
        wall_s = time.perf_counter() - started
        logs = read_rank_logs(log_dir)
        errors = read_rank_errors(folder / ERRORS_DIR)
        beats = read_heartbeats(folder / HEARTBEAT_DIR)
    if stop.signum is not None:
        return LaunchResult(None, False, wall_s, output[-TAIL_CHARS:], rank_logs=logs,
                            interrupted=stop.signum,
                            error=f"interrupted by {signal_name(stop.signum)} after "
                                  f"{wall_s:.1f} s; all ranks and their children killed")
    if stop.hang is not None:
        return LaunchResult(None, True, wall_s, output[-TAIL_CHARS:], stop.hang.rank,
                            f"{stop.hang.reason}; all ranks and their children killed", logs)
    if stop.deadline:
        return _timeout_result(wall_s, output, logs, timeout_s, stop.silent_s, beats)
    return _result(stop.code, wall_s, output, logs, errors)


def _result(code: int, wall_s: float, output: str, logs: dict[int, str],
            errors: dict[int, dict] | None = None) -> LaunchResult:
    """Name the failed rank and its own error (root_cause)."""
    result = LaunchResult(code, False, wall_s, output[-TAIL_CHARS:], rank_logs=logs)
    if code == 0:
        return result
    agent = agent_signal(code, output)
    if agent is not None:  # the agent itself was signalled: the cause, not its ranks' ends
        result.error = (f"the torchrun agent was killed by {signal_name(agent)} (signal "
                        f"{agent}), sent by another process; its ranks ended with it"
                        if code < 0 else
                        f"the torchrun agent received {signal_name(agent)} (signal {agent}) "
                        "from another process and stopped its ranks")
        return result
    result.failed_rank, error = root_cause(output, logs, errors or {})
    result.error = error[-TAIL_CHARS:].strip()
    return result


def _timeout_result(wall_s: float, output: str, logs: dict[int, str], timeout_s: float,
                    silent_s: dict[int, float], beats: dict[int, dict] | None = None
                    ) -> LaunchResult:
    """A launch ended by the deadline; its error says which rank went quiet first, and how."""
    result = LaunchResult(None, True, wall_s, output[-TAIL_CHARS:], rank_logs=logs)
    result.error = timeout_reason(timeout_s, logs, silent_s, beats)
    return result


if __name__ == "__main__" and sys.argv[1:2] == ["agent"]:
    agent_main(sys.argv[2:])
