"""What else used the machine in a window: the /proc arithmetic on synthetic snapshots and
files, the thresholds' validation, the GPU side against a fake NVML, and a real CPU hog beside
a window getting it flagged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelbench.config.errors import ConfigError
from accelbench.hardware import gpu_disturbance as gpu
from accelbench.hardware.disturbance import (
    OTHER_CPU_THRESHOLD,
    DisturbanceProbe,
    Snapshot,
    disturbance,
    read_pid_stat,
    read_proc_stat,
    snapshot,
    tree_of,
    with_gpu,
)

PROC_STAT = """cpu  3000 10 300 9000 60 0 70 20 0 0
cpu0 1500 5 150 4500 30 0 35 10 0 0
cpu1 1500 5 150 4500 30 0 35 10 0 0
intr 1 2 3
"""


def _snap(t_s: float, busy: int, tree: int, steal: int = 0, total: int | None = None,
          khz: tuple[int, ...] = ()) -> Snapshot:
    """A snapshot of a 2-CPU host at 100 ticks a second."""
    return Snapshot(t_s, busy, total if total is not None else 200 * t_s, steal, 2, tree,
                    frozenset({1}), 0.5, khz, 100)


def test_proc_stat_busy_excludes_idle_iowait_and_steal():
    busy, total, steal, n_cpus = read_proc_stat(PROC_STAT)
    assert busy == 3000 + 10 + 300 + 0 + 70
    assert total == busy + 9000 + 60 + 20 and steal == 20 and n_cpus == 2


def test_pid_stat_survives_a_command_name_with_spaces_and_parentheses():
    text = "42 (my (odd) name) S 7 42 42 0 -1 0 0 0 0 0 11 12 13 14 20 0 1 0 5 0 0"
    assert read_pid_stat(text) == (7, 11 + 12 + 13 + 14)


def test_tree_holds_descendants_and_not_strangers():
    stats = {10: (1, 5), 11: (10, 7), 12: (11, 9), 13: (1, 100), 14: (13, 50)}
    pids, ticks = tree_of(10, stats)
    assert pids == {10, 11, 12} and ticks == 5 + 7 + 9
    assert tree_of(99, stats) == (frozenset(), 0)  # the root exited: nothing is ours


def test_others_cpu_is_the_host_busy_time_less_ours():
    # 2 s on 2 CPUs = 4 CPU-seconds of capacity; host busy 3.0 s, of which ours 1.0 s
    d = disturbance(_snap(10.0, 1000, 400), _snap(12.0, 1300, 500))
    assert d.window_s == 2.0 and d.n_cpus == 2
    assert d.own_cpu_s == pytest.approx(1.0) and d.other_cpu_s == pytest.approx(2.0)
    assert d.other_cpu_fraction == pytest.approx(0.5)
    assert d.disturbed and "50% of the CPU capacity" in d.reasons[0]


def test_a_window_only_we_used_is_quiet():
    # all the host's busy time is ours (+2 ticks of kernel work: 0.5% of capacity)
    d = disturbance(_snap(0.0, 0, 0), _snap(2.0, 302, 300))
    assert d.other_cpu_fraction == pytest.approx(0.005) and not d.disturbed and d.reasons == ()


def test_others_cpu_is_floored_at_zero():
    # per-process and host accounting round differently: ours can exceed the host's busy time
    d = disturbance(_snap(0.0, 0, 0), _snap(1.0, 100, 104))
    assert d.other_cpu_s == 0.0 and not d.disturbed


def test_steal_beyond_its_threshold_flags_the_window():
    d = disturbance(_snap(0.0, 0, 0, steal=0, total=0), _snap(1.0, 100, 100, steal=20,
                                                           total=200))
    assert d.steal_fraction == pytest.approx(0.1) and d.disturbed
    assert "stole 10%" in d.reasons[0]
    calm = disturbance(_snap(0.0, 0, 0, steal=0, total=0), _snap(1.0, 100, 100, steal=20,
                                                              total=200), steal_threshold=0.2)
    assert not calm.disturbed


def test_thresholds_are_arguments():
    start, end = _snap(0.0, 0, 0), _snap(1.0, 60, 0)  # others: 30% of the capacity
    assert disturbance(start, end).disturbed
    assert not disturbance(start, end, other_cpu_threshold=0.5).disturbed


def test_frequency_is_the_range_over_both_edges():
    d = disturbance(_snap(0.0, 0, 0, khz=(2_400_000, 1_800_000)),
                    _snap(1.0, 0, 0, khz=(3_000_000, 2_000_000)))
    assert (d.cpu_mhz_min, d.cpu_mhz_max) == (1800.0, 3000.0)
    assert d.loadavg_1m == 0.5


def test_no_proc_means_unknown_not_quiet(tmp_path):
    start = snapshot(proc=tmp_path / "nowhere", sys_cpu=tmp_path)
    assert start.unavailable and "not Linux" in start.unavailable
    d = disturbance(start, start)
    assert d.disturbed is None and d.other_cpu_s is None and d.unavailable
    assert json.loads(json.dumps(d.to_dict()))["disturbed"] is None


def _fake_proc(root: Path) -> None:
    """A /proc with a host of 2 CPUs, our pid 100 with child 101, a stranger 200."""
    root.mkdir()
    (root / "stat").write_text(PROC_STAT)
    (root / "loadavg").write_text("1.50 1.00 0.50 2/100 300\n")
    for pid, ppid, ticks in ((100, 1, 10), (101, 100, 20), (200, 1, 999)):
        (root / str(pid)).mkdir()
        (root / str(pid) / "stat").write_text(
            f"{pid} (python x) R {ppid} 0 0 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 5\n")


def test_snapshot_reads_proc_and_sys(tmp_path):
    proc, sys_cpu = tmp_path / "proc", tmp_path / "cpu"
    _fake_proc(proc)
    for cpu, khz in (("cpu0", 2_100_000), ("cpu1", 2_900_000)):
        (sys_cpu / cpu / "cpufreq").mkdir(parents=True)
        (sys_cpu / cpu / "cpufreq" / "scaling_cur_freq").write_text(f"{khz}\n")
    s = snapshot(100, proc, sys_cpu)
    assert s.unavailable is None and s.n_cpus == 2 and s.steal_ticks == 20
    assert s.tree_pids == {100, 101} and s.tree_ticks == 30
    assert s.loadavg_1m == 1.5 and s.cpu_khz == (2_100_000, 2_900_000)


@pytest.mark.parametrize("value", [0, -0.1, 1.5, float("nan"), float("inf"), True, "0.1"])
def test_thresholds_out_of_range_are_refused_naming_the_field(value):
    with pytest.raises(ConfigError, match=r"other_cpu_threshold.*\(0, 1\]"):
        DisturbanceProbe(other_cpu_threshold=value)
    with pytest.raises(ConfigError, match="steal_threshold"):
        disturbance(_snap(0.0, 0, 0), _snap(1.0, 0, 0), steal_threshold=value)


def test_stop_before_start_is_a_programming_error():
    with pytest.raises(RuntimeError, match="before start"):
        DisturbanceProbe().stop()


class FakeNvml:
    """The few pynvml calls gpu_disturbance makes (the real ones are untested on a GPU)."""

    NVML_CLOCK_SM = 1

    class NVMLError(Exception):
        pass

    def __init__(self, mask: int, pids: list[int]) -> None:
        self.mask, self.pids = mask, pids

    def nvmlDeviceGetClockInfo(self, handle, clock):  # noqa: N802
        assert clock == self.NVML_CLOCK_SM
        return 1410

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):  # noqa: N802
        return self.mask

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802
        return [type("Proc", (), {"pid": pid})() for pid in self.pids]


def test_gpu_reason_bits_are_named():
    assert gpu.reason_names(0x4 | 0x40 | 0x4000) == ["sw_power_cap", "hw_thermal_slowdown",
                                                     "0x4000"]


def test_gpu_slowdown_and_other_processes_flag_a_window():
    quiet_cpu = disturbance(_snap(0.0, 0, 0), _snap(1.0, 0, 0))
    ours = frozenset({100})
    calm = gpu.nvidia_state(FakeNvml(0x4, [100]), None, ours)  # power cap: recorded only
    assert calm["clock_reasons"] == ["sw_power_cap"] and calm["other_pids"] == []
    assert not with_gpu(quiet_cpu, calm, calm).disturbed
    hot = gpu.nvidia_state(FakeNvml(0x40, [100, 555]), None, ours)
    d = with_gpu(quiet_cpu, calm, hot)
    assert d.disturbed and d.gpu == {"start": calm, "end": hot}
    assert d.reasons == ("GPU clocks held down: hw_thermal_slowdown",
                         "other processes on the GPU: pids 555")


def test_gpu_pids_of_another_namespace_are_recorded_not_judged():
    state = gpu.nvidia_state(FakeNvml(0, [7001, 7002]), None, frozenset({100}))
    assert state["pids_comparable"] is False and state["other_pids"] == [7001, 7002]
    assert gpu.gpu_reasons(state, state) == ()


def _host_cpus() -> int:
    return read_proc_stat(Path("/proc/stat").read_text())[3]


HOG = "while True: pass"
# Starts the hogs and exits, so they are reparented away from our process tree: others' work.
LAUNCH = ("import subprocess, sys\n"
          "for _ in range(int(sys.argv[1])):\n"
          "    p = subprocess.Popen([sys.executable, '-c', sys.argv[2]],\n"
          "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
          "    print(p.pid, flush=True)\n")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_a_cpu_hog_beside_the_window_flags_it():
    n = _host_cpus()
    if n > 16 or len(os.sched_getaffinity(0)) < n:
        pytest.skip("fills every CPU /proc/stat lists: too many, or not all ours to fill")
    out = subprocess.run([sys.executable, "-c", LAUNCH, str(n), HOG], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    hogs = [int(pid) for pid in out.split()]
    try:
        time.sleep(0.5)  # the hogs are up and spinning
        probe = DisturbanceProbe()
        probe.start()
        time.sleep(1.0)
        d = probe.stop()
    finally:
        for pid in hogs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert d.disturbed, d
    assert d.other_cpu_fraction > 5 * OTHER_CPU_THRESHOLD, d
    assert d.own_cpu_s < 0.2, d  # we slept


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_our_own_child_counts_as_ours():
    child = subprocess.Popen([sys.executable, "-c", HOG])
    try:
        time.sleep(0.3)
        probe = DisturbanceProbe()
        probe.start()
        time.sleep(1.0)
        d = probe.stop()
        assert child.pid in snapshot().tree_pids
    finally:
        child.kill()
        child.wait()
    # a spinning child gets a share of a CPU however loaded the machine: well over 0.05 s
    assert d.own_cpu_s >= 0.05, d
