"""What else used the machine during a timed window, so that a cell timed beside other work
is flagged rather than reported as a finding; Linux /proc and /sys, no torch.

Two snapshots, at the window's start and end, give: the CPU time of every process on the host
(/proc/stat: user, nice, system, irq, softirq; guest is inside user), the steal time a
hypervisor took, and our own process tree's CPU time (utime + stime + cutime + cstime of this
process and its live descendants, /proc/<pid>/stat: a child reaped during the window moves its
time into its parent's cutime, so it still counts as ours). CPU time of others is the host's
busy time less ours, floored at 0. A process that left our tree (a daemon reparented to init)
counts as another's. /proc/stat counts in ticks (usually 10 ms), so a window under about
0.2 s cannot be judged finely. Load average and CPU frequency are recorded, never judged: the
load average is a minute's decaying mean that includes our own work.

Outside Linux (no /proc/stat) every field is None, `disturbed` is None and `unavailable` says
why.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from accelbench.config.errors import ConfigError

# A window is disturbed when processes outside our tree used more than this fraction of the
# machine's CPU capacity (window seconds x CPUs) ...
OTHER_CPU_THRESHOLD = 0.10
# ... or the hypervisor stole more than this fraction of all CPU time.
STEAL_THRESHOLD = 0.05
PROC = Path("/proc")
SYS_CPU = Path("/sys/devices/system/cpu")


def check_threshold(name: str, value: float) -> float:
    """A threshold is a fraction in (0, 1]; anything else is refused naming the field."""
    if (not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value)
            or not 0 < value <= 1):
        raise ConfigError(name, f"must be a fraction in (0, 1], got {value!r}", "0 < value <= 1")
    return float(value)


@dataclass(frozen=True)
class Snapshot:
    """The counters at one instant; ticks are summed over all CPUs (CPU-seconds x tick_hz)."""

    t_s: float  # time.monotonic()
    busy_ticks: int | None = None  # all processes: every state but idle, iowait and steal
    total_ticks: int | None = None  # every state, idle included
    steal_ticks: int | None = None
    n_cpus: int | None = None
    tree_ticks: int | None = None  # our process tree
    tree_pids: frozenset[int] = frozenset()
    loadavg_1m: float | None = None
    cpu_khz: tuple[int, ...] = ()  # scaling_cur_freq of each CPU that exposes it
    tick_hz: int = 100
    unavailable: str | None = None


def read_proc_stat(text: str) -> tuple[int, int, int, int]:
    """(busy, total, steal ticks, CPU count) from the text of /proc/stat."""
    lines = text.splitlines()
    values = [int(v) for v in lines[0].split()[1:]]
    values += [0] * (8 - len(values))
    user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
    n_cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    busy = user + nice + system + irq + softirq
    return busy, busy + idle + iowait + steal, steal, n_cpus


def read_pid_stat(text: str) -> tuple[int, int]:
    """(parent pid, utime + stime + cutime + cstime ticks) from a /proc/<pid>/stat text; the
    command name may hold spaces and parentheses, so fields are counted after the last ')'."""
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is the state (field 3 of proc(5)); ppid is 4, utime..cstime are 14..17
    return int(fields[1]), sum(int(v) for v in fields[11:15])


def _all_pid_stats(proc: Path) -> dict[int, tuple[int, int]]:
    """pid -> (parent, ticks) of every process readable now (one may exit while we read)."""
    out = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                out[int(entry.name)] = read_pid_stat((entry / "stat").read_text())
            except (OSError, ValueError, IndexError):
                continue
    return out


def tree_of(root: int, stats: dict[int, tuple[int, int]]) -> tuple[frozenset[int], int]:
    """The pids of root and its live descendants, and their summed ticks."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in tree:
            tree.add(pid)
            todo += children.get(pid, [])
    return frozenset(tree), sum(stats[pid][1] for pid in tree)


def _loadavg(proc: Path) -> float | None:
    try:
        return float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_khz(sys_cpu: Path) -> tuple[int, ...]:
    """The current frequency of each CPU whose cpufreq driver exposes it (a VM often has none)."""
    out = []
    for path in sorted(sys_cpu.glob("cpu[0-9]*/cpufreq/scaling_cur_freq")):
        try:
            out.append(int(path.read_text().strip()))
        except (OSError, ValueError):
            continue
    return tuple(out)


def snapshot(root_pid: int | None = None, proc: Path = PROC, sys_cpu: Path = SYS_CPU
             ) -> Snapshot:
    """The counters now, for the process tree under root_pid (this process by default)."""
    now = time.monotonic()
    try:
        busy, total, steal, n_cpus = read_proc_stat((proc / "stat").read_text())
    except (OSError, ValueError, IndexError) as err:
        return Snapshot(now, unavailable=f"no readable {proc / 'stat'} (not Linux?): {err}")
    pids, ticks = tree_of(root_pid or os.getpid(), _all_pid_stats(proc))
    return Snapshot(now, busy, total, steal, n_cpus, ticks, pids, _loadavg(proc),
                    _cpu_khz(sys_cpu), os.sysconf("SC_CLK_TCK"))


@dataclass(frozen=True)
class Disturbance:
    """What else used the machine in one window, and whether that crosses the thresholds."""

    window_s: float
    n_cpus: int | None
    own_cpu_s: float | None  # our process tree
    other_cpu_s: float | None  # every other process on the host, floored at 0
    other_cpu_fraction: float | None  # other_cpu_s / (window_s x n_cpus)
    steal_fraction: float | None  # stolen / all CPU time
    loadavg_1m: float | None  # at the window's end
    cpu_mhz_min: float | None
    cpu_mhz_max: float | None
    disturbed: bool | None  # None: could not be judged (see unavailable)
    reasons: tuple[str, ...]
    other_cpu_threshold: float = OTHER_CPU_THRESHOLD
    steal_threshold: float = STEAL_THRESHOLD
    unavailable: str | None = None
    gpu: dict[str, object] | None = field(default=None)

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON."""
        out = asdict(self)
        out["reasons"] = list(self.reasons)
        return out


def _judge(other_fraction: float, steal_fraction: float, other_max: float, steal_max: float
           ) -> tuple[str, ...]:
    """The reasons a window counts as disturbed (empty when it does not)."""
    reasons = []
    if other_fraction > other_max:
        reasons.append(f"other processes used {other_fraction:.0%} of the CPU capacity "
                       f"(threshold {other_max:.0%})")
    if steal_fraction > steal_max:
        reasons.append(f"the hypervisor stole {steal_fraction:.0%} of CPU time "
                       f"(threshold {steal_max:.0%})")
    return tuple(reasons)


def disturbance(start: Snapshot, end: Snapshot, other_cpu_threshold: float = OTHER_CPU_THRESHOLD,
                steal_threshold: float = STEAL_THRESHOLD) -> Disturbance:
    """The window between two snapshots: CPU time of others, steal, load, frequency, verdict."""
    other_max = check_threshold("other_cpu_threshold", other_cpu_threshold)
    steal_max = check_threshold("steal_threshold", steal_threshold)
    window = max(end.t_s - start.t_s, 0.0)
    reason = start.unavailable or end.unavailable
    if reason or start.busy_ticks is None or end.busy_ticks is None:
        return Disturbance(window, None, None, None, None, None, None, None, None, None, (),
                           other_max, steal_max, reason or "incomplete snapshot")
    hz, n_cpus = end.tick_hz, end.n_cpus or 1
    own = (end.tree_ticks - start.tree_ticks) / hz
    other = max((end.busy_ticks - start.busy_ticks) / hz - own, 0.0)
    total = end.total_ticks - start.total_ticks
    steal = (end.steal_ticks - start.steal_ticks) / total if total > 0 else 0.0
    fraction = other / (window * n_cpus) if window > 0 else 0.0
    khz = start.cpu_khz + end.cpu_khz
    reasons = _judge(fraction, steal, other_max, steal_max)
    return Disturbance(window, n_cpus, own, other, fraction, steal, end.loadavg_1m,
                       min(khz) / 1e3 if khz else None, max(khz) / 1e3 if khz else None,
                       bool(reasons), reasons, other_max, steal_max)


class DisturbanceProbe:
    """Snapshots at a window's start and end; stop() returns the window's Disturbance. Given
    gpu_uuid (an NVIDIA GPU's, as torch reports it), the GPU's state is read at both edges
    too (accelbench.hardware.gpu_disturbance; ran on one H200)."""

    def __init__(self, other_cpu_threshold: float = OTHER_CPU_THRESHOLD,
                 steal_threshold: float = STEAL_THRESHOLD, root_pid: int | None = None,
                 gpu_uuid: str | None = None) -> None:
        self.other_cpu_threshold = check_threshold("other_cpu_threshold", other_cpu_threshold)
        self.steal_threshold = check_threshold("steal_threshold", steal_threshold)
        self.root_pid = root_pid
        self.gpu_uuid = gpu_uuid
        self._start: Snapshot | None = None
        self._gpu_start: dict[str, object] | None = None

    def start(self) -> None:
        """Snapshot the window's start."""
        self._start = snapshot(self.root_pid)
        if self.gpu_uuid is not None:
            self._gpu_start = self._gpu_state(self._start.tree_pids)

    def stop(self) -> Disturbance:
        """Snapshot the window's end and judge the window."""
        if self._start is None:
            raise RuntimeError("DisturbanceProbe.stop() before start()")
        end = snapshot(self.root_pid)
        cpu = disturbance(self._start, end, self.other_cpu_threshold, self.steal_threshold)
        if self._gpu_start is None:
            return cpu
        return with_gpu(cpu, self._gpu_start, self._gpu_state(end.tree_pids))

    def _gpu_state(self, own_pids: frozenset[int]) -> dict[str, object]:
        """The GPU's state now (opening and closing NVML around the reading)."""
        from accelbench.hardware import gpu_disturbance as gpu

        opened = gpu.open_nvidia(str(self.gpu_uuid))
        if isinstance(opened, str):
            return {"unavailable": opened}
        nvml, handle = opened
        try:
            return gpu.nvidia_state(nvml, handle, own_pids | {os.getpid()})
        finally:
            nvml.nvmlShutdown()


def with_gpu(cpu: Disturbance, start: dict[str, object], end: dict[str, object]
             ) -> Disturbance:
    """A window's Disturbance with the GPU's states at its edges and their reasons added."""
    from accelbench.hardware.gpu_disturbance import gpu_reasons

    extra = gpu_reasons(start, end)
    return replace(cpu, gpu={"start": start, "end": end}, reasons=cpu.reasons + extra,
                   disturbed=True if extra else cpu.disturbed)
