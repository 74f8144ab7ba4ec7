"""hardware.device on the CPU: selection, no-op synchronisation, malloc's bytes in use (RSS
without glibc) as the CPU's memory, and
the lookup (torch.accelerator first, then the backend, else "unavailable") with fake backends."""

from types import SimpleNamespace

import pytest
import torch

from accelbench.bench import guard
from accelbench.bench.dtypes import TORCH_DTYPES, parse_dtype
from accelbench.bench.peak_memory import PeakMemory
from accelbench.bench.timing import PhaseTimer
from accelbench.config.errors import ConfigError
from accelbench.config.vocab import DTYPES
from accelbench.hardware import device as devices
from accelbench.hardware.detect import resolve_device
from accelbench.hardware.environment import environment
from accelbench.parallel.dist import backend_for

CPU = torch.device("cpu")
XPU = torch.device("xpu")  # a real device type with no XPU here: the fakes below stand in


def test_select_cpu_and_auto_is_the_cpu_here():
    assert devices.select("cpu") == CPU
    assert devices.select("auto") == CPU  # this machine has no accelerator
    assert resolve_device("cpu") == devices.select("cpu")


@pytest.mark.parametrize("name, text", [
    ("cuda", "device: cuda requested but not available here (allowed: auto, cpu)"),
    ("cuda:0", "device: cuda requested but not available here (allowed: auto, cpu)"),
    ("hpu", "device: hpu requested but not available here (allowed: auto, cpu)"),
    ("tpu", "device: unknown device 'tpu' (allowed: auto, cpu, cuda, xpu, mps, hpu)"),
    ("cpu:1", "device: 'cpu:1' names device 1 but there are 1 (allowed: cpu:0 to cpu:0)"),
])
def test_select_refuses_in_one_line_naming_the_field(name, text):
    with pytest.raises(ConfigError) as err:
        devices.select(name)
    assert err.value.field == "device"
    assert str(err.value) == text
    assert "\n" not in str(err.value)


def test_auto_takes_the_current_accelerator(monkeypatch):
    monkeypatch.setattr(torch, "accelerator", SimpleNamespace(current_accelerator=lambda: XPU))
    monkeypatch.setattr(devices, "is_available", lambda kind: kind in ("cpu", "xpu"))
    assert devices.select("auto") == XPU


def test_cpu_sync_reset_and_cache_are_no_ops():
    assert devices.synchronize(CPU) is None
    assert devices.reset_peak(CPU) is None
    assert devices.empty_cache(CPU) is None
    assert devices.device_count("cpu") == 1
    assert devices.device_count("cuda") == 0
    assert not devices.has_timing_events(CPU)
    assert environment(CPU)["device_count"] == 1


@pytest.mark.skipif(devices.heap_in_use_bytes() is None,
                    reason="no glibc mallinfo2 here (another C library or glibc < 2.33): RSS")
def test_cpu_memory_is_what_malloc_holds():
    assert devices.memory_reporting(CPU) == devices.HEAP_METHOD
    assert devices.memory_unavailable_reason(CPU) is None
    before = devices.allocated_bytes(CPU)
    block = torch.ones(16 * 2**20 // 4)  # 16 MiB through torch's CPU allocator (malloc)
    held = devices.allocated_bytes(CPU) - before
    del block
    assert 16 * 2**20 <= held < 17 * 2**20
    assert devices.allocated_bytes(CPU) - before < 2**20  # freed: glibc may keep it, not count it
    assert devices.max_allocated_bytes(CPU) is None  # no counter: PeakMemory samples instead


def test_cpu_memory_without_glibc_is_the_process_rss(monkeypatch):
    monkeypatch.setattr(devices, "heap_in_use_bytes", lambda: None)
    assert devices.host_memory_bytes() == pytest.approx(devices.rss_bytes(), abs=64 * 2**20)


def test_peak_memory_on_cpu_measures_an_allocation():
    size = 64 * 2**20
    with PeakMemory(CPU) as peak:
        block = torch.ones(size // 4, dtype=torch.float32)  # written, so resident
        inside = peak.current_peak_bytes()
    assert block.numel() * 4 == size
    assert peak.method == devices.HEAP_METHOD
    assert peak.peak_bytes - peak.base_bytes >= 0.9 * size
    assert inside >= 0.9 * size


def _no_rss(monkeypatch):
    """Make any reading of host memory (malloc's or RSS) fail the test."""
    def fail() -> int:
        raise AssertionError("host memory read for a device that is not the CPU")
    for name in ("rss_bytes", "heap_in_use_bytes", "host_memory_bytes"):
        monkeypatch.setattr(devices, name, fail)


def test_a_device_without_memory_statistics_records_unavailable_not_rss(monkeypatch):
    _no_rss(monkeypatch)
    synced = []
    fake = SimpleNamespace(synchronize=lambda device=None: synced.append(device),
                           is_available=lambda: True)
    monkeypatch.setattr(devices, "backend", lambda kind: fake if kind == "xpu" else None)
    monkeypatch.setattr(devices, "_accelerator_fn", lambda kind, name: None)
    assert devices.memory_reporting(XPU) is None
    assert devices.allocated_bytes(XPU) is None and devices.max_allocated_bytes(XPU) is None
    with PeakMemory(XPU) as peak:
        assert peak.current_peak_bytes() is None
    assert peak.peak_bytes is None
    assert peak.method == ("unavailable: torch.xpu has no resettable max_memory_allocated "
                           "in this torch")
    devices.synchronize(XPU)
    assert synced == [XPU]


def test_an_absent_backend_and_mps_are_unavailable(monkeypatch):
    _no_rss(monkeypatch)
    with PeakMemory(torch.device("hpu")) as peak:  # torch.hpu only after habana's import
        pass
    assert peak.peak_bytes is None
    assert peak.method == ("unavailable: torch.hpu is absent in this process: nothing reports "
                           "its memory")
    with PeakMemory(torch.device("mps")) as peak:
        pass
    assert peak.peak_bytes is None
    assert peak.method.startswith("unavailable: torch.mps keeps no peak statistic")


class _Counter:
    """A fake allocator: memory_allocated, a resettable peak, and a record of the calls."""

    def __init__(self) -> None:
        self.now, self.peak, self.calls = 100, 500, []

    def fns(self) -> dict:
        def record(name, value=None):
            def fn(device=None):
                self.calls.append((name, device))
                return value() if value else None
            return fn
        return {"memory_allocated": record("memory_allocated", lambda: self.now),
                "max_memory_allocated": record("max_memory_allocated", lambda: self.peak),
                "reset_peak_memory_stats": record("reset", self._reset),
                "synchronize": record("synchronize"), "empty_cache": record("empty_cache"),
                "device_count": record("device_count", lambda: 2)}

    def _reset(self) -> None:
        self.peak = self.now


def test_torch_accelerator_is_asked_first(monkeypatch):
    _no_rss(monkeypatch)
    counter = _Counter()
    monkeypatch.setattr(torch, "accelerator",
                        SimpleNamespace(current_accelerator=lambda: XPU, **counter.fns()))
    monkeypatch.setattr(devices, "backend", lambda kind: None)  # the backend must not be needed
    monkeypatch.setattr(devices, "is_available", lambda kind: True)
    assert devices.device_count("xpu") == 2
    with PeakMemory(XPU) as peak:
        counter.peak = 900  # what the window allocated at most
    assert peak.method == "torch.accelerator.max_memory_allocated (xpu)"
    assert (peak.base_bytes, peak.peak_bytes) == (100, 900)
    names = [name for name, _ in counter.calls if name != "device_count"]
    assert names[:3] == ["synchronize", "reset", "memory_allocated"]
    assert all(device == XPU for name, device in counter.calls if name != "device_count")
    guard.release_device_memory(XPU)
    assert counter.calls[-1][0] == "empty_cache"


def test_the_backend_serves_what_torch_accelerator_lacks(monkeypatch):
    _no_rss(monkeypatch)
    counter = _Counter()
    monkeypatch.setattr(torch, "accelerator", SimpleNamespace(current_accelerator=lambda: None))
    module = SimpleNamespace(**counter.fns())
    monkeypatch.setattr(devices, "backend", lambda kind: module if kind == "xpu" else None)
    with PeakMemory(XPU) as peak:
        counter.peak = 700
    assert peak.method == "torch.xpu.max_memory_allocated (xpu)"
    assert (peak.base_bytes, peak.peak_bytes) == (100, 700)


def test_phase_timer_on_cpu_uses_perf_counter_edges():
    timer = PhaseTimer(CPU)
    with timer.phase("x"):
        pass
    assert timer.times_s()["x"][0] >= 0.0


def test_dtype_names_come_from_the_vocabulary():
    assert tuple(TORCH_DTYPES) == DTYPES
    assert parse_dtype("bf16") is torch.bfloat16
    with pytest.raises(ConfigError, match="allowed: fp32, fp16, bf16"):
        parse_dtype("fp8")


def test_process_group_backend_follows_the_device_type():
    assert backend_for(CPU) == "gloo"
    assert backend_for(torch.device("cuda", 0)) == "nccl"
