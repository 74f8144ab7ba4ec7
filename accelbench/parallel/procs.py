"""Processes of a launch: the tree below the torchrun agent (read from /proc), tying launched
processes to their parent's life, and turning SIGINT/SIGTERM into an exception the launcher
can clean up after.

torchrun starts each worker in a session of its own, so neither killpg nor the terminal's
Ctrl-C reaches them: the launcher finds them by walking parent links in /proc. A parent killed
with SIGKILL cannot clean up at all, so the agent asks the kernel for SIGTERM when its parent
dies (prctl PR_SET_PDEATHSIG, Linux) and every process also polls its parent id (any POSIX
system): when the agent is gone, a rank ends itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PR_SET_PDEATHSIG = 1
PARENT_POLL_S = 0.5


def proc_stat(pid: int) -> tuple[int, str, int, float] | None:
    """(parent pid, state letter, start time in clock ticks, CPU seconds used) from
    /proc/<pid>/stat, or None where there is no such process (or no /proc)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the command name may hold spaces and ')'
    cpu_s = (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime + stime, all threads
    return int(fields[1]), fields[0], int(fields[19]), cpu_s


def start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks since boot): with the pid, it names one process."""
    stat = proc_stat(pid)
    return stat[2] if stat else None


def descendants(root_pid: int) -> dict[int, int]:
    """Every live process below root_pid (pid -> start time), found by walking parent links in
    /proc: torchrun starts each worker in a session of its own, out of reach of killpg."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := proc_stat(int(entry.name))) is not None:
            children.setdefault(stat[0], []).append((int(entry.name), stat[2]))
    found: dict[int, int] = {}
    todo = [root_pid]
    while todo:
        for pid, started in children.get(todo.pop(), []):
            if pid not in found:
                found[pid] = started
                todo.append(pid)
    return found


def alive(pid: int, started: int | None = None) -> bool:
    """The same process (pid, and start time where given) exists and is not a zombie. Without
    /proc, whether a signal could be sent to pid."""
    stat = proc_stat(pid)
    if stat is None:
        if Path("/proc/self/stat").exists():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return (started is None or stat[2] == started) and stat[1] not in "ZX"


def tree_cpu_s(pid: int) -> float | None:
    """CPU seconds used by pid and every live process below it (compile workers, data
    loaders), or None without /proc."""
    stat = proc_stat(pid)
    if stat is None:
        return None
    total = stat[3]
    for child in descendants(pid):
        if (sub := proc_stat(child)) is not None:
            total += sub[3]
    return total


def own_cpu_s(pid: int | None) -> float | None:
    """CPU seconds used by pid alone (not its children), or None."""
    stat = proc_stat(pid) if pid else None
    return stat[3] if stat else None


def worker_pids(agent_pid: int) -> dict[int, int]:
    """rank -> pid of the workers a torchrun agent started: its children whose environment
    holds the RANK torchrun gave them (their own children inherit it, so only children)."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = proc_stat(int(entry.name))
        if stat is None or stat[0] != agent_pid:
            continue
        rank = _env_value(int(entry.name), b"RANK")
        if rank is not None and rank.isdigit():
            found[int(rank)] = int(entry.name)
    return found


def _env_value(pid: int, name: bytes) -> str | None:
    """One variable of a process's environment (/proc/<pid>/environ), or None."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in environ.split(b"\0"):
        key, _, value = item.partition(b"=")
        if key == name:
            return value.decode(errors="replace")
    return None


def proc_state(pid: int) -> str:
    """The state letter /proc shows (R running, S sleeping, D uninterruptible, T stopped,
    Z zombie), or '' where it cannot be read."""
    stat = proc_stat(pid)
    return stat[1] if stat else ""


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> bool:
    """Ask the kernel to send `sig` to this process when its parent thread exits (Linux prctl
    PR_SET_PDEATHSIG); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def watch_parent(parent_pid: int, sig: signal.Signals | None,
                 kill_tree_after_s: float | None = None, poll_s: float = PARENT_POLL_S) -> None:
    """A daemon thread that, once this process's parent is no longer parent_pid (it died and
    this process was handed to init or a subreaper), sends `sig` to this process; then, with
    kill_tree_after_s, waits that long and SIGKILLs every descendant and itself: the last
    resort when a clean shutdown wedges (a stopped child ignores SIGTERM)."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        if sig is not None:
            os.kill(os.getpid(), sig)
        if kill_tree_after_s is None:
            return
        time.sleep(kill_tree_after_s)
        for pid, started in descendants(os.getpid()).items():
            if alive(pid, started):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="accelbench-parent-watch", daemon=True).start()


class Interrupted(BaseException):  # noqa: N818 - like KeyboardInterrupt, which it stands for
    """SIGINT or SIGTERM reached this process while a `signals_raise` block ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal_name(signum)}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """What a shell reports for a process this signal ended: 128 + the number."""
        return 128 + self.signum


def signal_name(signum: int) -> str:
    """SIGINT, SIGKILL, ... (or 'signal N' for a number with no name)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


_HANDLED = (signal.SIGINT, signal.SIGTERM)
_caught: list[int] = []  # signals taken while a signals_raise block is open (first one raised)
_depth = [0]


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block, the first SIGINT or SIGTERM raises Interrupted in the main thread and
    later ones are ignored until the outermost block ends, so the clean-up after the first is
    not cut short. Signals the process ignores (nohup) stay ignored; outside the main thread
    this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in _HANDLED}

    def handler(signum: int, frame: object) -> None:
        if _caught:
            return
        _caught.append(signum)
        raise Interrupted(signum)

    for sig, old in previous.items():
        if old is not signal.SIG_IGN:
            signal.signal(sig, handler)
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        for sig, old in previous.items():
            signal.signal(sig, old)
        if _depth[0] == 0:
            _caught.clear()
