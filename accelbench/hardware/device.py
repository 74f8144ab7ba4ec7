"""The one module device handling goes through: selection, synchronisation, memory statistics,
peak reset, cache release and event timing, for CPU, CUDA (ROCm too), XPU, HPU and MPS.

Each call first asks `torch.accelerator` when the installed torch has the function and the
device is the current accelerator (checked at call time: torch 2.11 and 2.13 differ in what
it holds), else the backend's own module (torch.cuda, torch.xpu, torch.hpu, torch.mps).
On a CPU the process is the device, so its memory is what the host's malloc has handed out
(glibc's mallinfo2; the host RSS where there is none); that is the only place host memory stands
for device memory. A device that cannot report a peak says so (None), never RSS.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any

import torch

from accelbench.config.errors import ConfigError
from accelbench.config.records.fields import RSS_METHOD

KINDS = ("cpu", "cuda", "xpu", "mps", "hpu")  # cuda covers ROCm (torch.version.hip)
DEVICE_CHOICES = ("auto", *KINDS)
PER_RANK_KINDS = ("cuda", "xpu", "hpu")  # several devices a node: a rank takes its local one
_AUTO_ORDER = ("cuda", "xpu", "hpu", "mps")  # what 'auto' tries when torch.accelerator is silent
_PER_DEVICE_SYNC = ("cuda", "xpu")  # backends whose synchronize() takes the device
_MPS_OWN = ("empty_cache", "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats")
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
HEAP_METHOD = "sampled heap in use (glibc mallinfo2)"  # a CPU's memory_reporting with glibc


def backend(kind: str) -> ModuleType | None:
    """torch's module for a device type (torch.cuda, torch.xpu, torch.mps, and torch.hpu only
    once habana_frameworks.torch is imported), or None for the CPU and unknown types."""
    return None if kind == "cpu" else getattr(torch, kind, None)


def _accelerator_fn(kind: str, name: str) -> Callable[..., Any] | None:
    """torch.accelerator.<name> when this torch has it and `kind` is the current accelerator."""
    acc = getattr(torch, "accelerator", None)
    if acc is None or not hasattr(acc, name) or not hasattr(acc, "current_accelerator"):
        return None
    current = acc.current_accelerator()
    return getattr(acc, name) if current is not None and current.type == kind else None


def _fn(kind: str, name: str) -> tuple[str, Callable[..., Any]] | None:
    """(where, function) for `name` on `kind`: torch.accelerator first, else the backend.
    MPS memory goes to torch.mps only: torch.accelerator's memory calls refused MPS until
    recently (pytorch issue 167447); torch.mps.empty_cache and current_allocated_memory are
    in every release we run."""
    fn = None if kind == "mps" and name in _MPS_OWN else _accelerator_fn(kind, name)
    if fn is not None:
        return "torch.accelerator", fn
    module = backend(kind)
    fn = getattr(module, name, None) if module is not None else None
    return (f"torch.{kind}", fn) if fn is not None else None


def is_available(kind: str) -> bool:
    """Whether this process can use a device of this type (the CPU always)."""
    if kind == "cpu":
        return True
    if kind == "mps":  # torch.backends.mps exists in every build; torch.mps.is_available not
        return torch.backends.mps.is_available()
    module = backend(kind)
    return module is not None and hasattr(module, "is_available") and bool(module.is_available())


def device_count(kind: str) -> int:
    """How many devices of this type the process sees (1 for the CPU, 0 when absent)."""
    if kind == "cpu":
        return 1
    if not is_available(kind):
        return 0
    found = _fn(kind, "device_count")
    return int(found[1]()) if found else 1


def _auto() -> torch.device:
    """The current accelerator torch reports, else the first available of _AUTO_ORDER, else
    the CPU."""
    acc = getattr(torch, "accelerator", None)
    current = acc.current_accelerator() if hasattr(acc, "current_accelerator") else None
    if current is not None and current.type in KINDS and is_available(current.type):
        return torch.device(current.type)
    for kind in _AUTO_ORDER:
        if is_available(kind):
            return torch.device(kind)
    return torch.device("cpu")


def select(name: str = "auto") -> torch.device:
    """The torch device for a --device value; 'auto' prefers an accelerator over the CPU. An
    indexed accelerator (cuda:N) is made current: CUDA events record on the current device's
    stream, so without it `--device cuda:1` would time an idle cuda:0."""
    kind = name.split(":")[0]
    if kind not in DEVICE_CHOICES:
        raise ConfigError("device", f"unknown device {name!r}", ", ".join(DEVICE_CHOICES))
    if kind == "auto":
        return _auto()
    if not is_available(kind):
        raise ConfigError("device", f"{kind} requested but not available here", "auto, cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError("device", f"cannot read {name!r}",
                          f"{kind} or {kind}:N with N a device index") from None
    count = device_count(kind)
    if device.index is not None and not 0 <= device.index < count:
        raise ConfigError("device", f"{name!r} names device {device.index} but there are "
                          f"{count}", f"{kind}:0 to {kind}:{count - 1}")
    set_current(device)
    return device


def set_current(device: torch.device) -> None:
    """Make an indexed accelerator the process's current one (a rank's own GPU)."""
    if device.type == "cpu" or device.index is None:
        return
    found = _fn(device.type, "set_device_index") or _fn(device.type, "set_device")
    if found:
        found[1](device)


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on the device (no-op on the CPU)."""
    if device.type == "cpu":
        return
    fn = _accelerator_fn(device.type, "synchronize")
    if fn is not None:
        fn(device)
        return
    module = backend(device.type)
    if module is not None and hasattr(module, "synchronize"):
        if device.type in _PER_DEVICE_SYNC:
            module.synchronize(device)
        else:  # torch.mps.synchronize() takes no device
            module.synchronize()


def has_timing_events(device: torch.device) -> bool:
    """Whether windows on this device are timed by device events (CUDA, ROCm included);
    elsewhere a synchronise and perf_counter bound each window."""
    return device.type == "cuda"


def timing_event(device: torch.device) -> Any:
    """A recorded-on-the-stream event with timing, for has_timing_events devices."""
    return torch.cuda.Event(enable_timing=True)


def rss_bytes() -> int:
    """Resident set size of this process now: a CPU device's memory where malloc cannot say."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE_BYTES


class _MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (malloc.h, glibc 2.33+): the malloc heap's counts in bytes."""

    _fields_ = [(field, ctypes.c_size_t) for field in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


@cache
def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    """glibc's mallinfo2, or None (another C library, or glibc before 2.33)."""
    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    return fn


def heap_in_use_bytes() -> int | None:
    """Bytes malloc has handed out and not had back (heap blocks in use, every arena, plus its
    mmapped blocks): CPU tensors and library buffers, not the freed blocks glibc keeps resident;
    the CPU's counterpart of an accelerator allocator's memory_allocated. None without glibc."""
    fn = _mallinfo2()
    if fn is None:
        return None
    info = fn()
    return int(info.uordblks + info.hblkhd)


def host_memory_bytes() -> int:
    """A CPU device's memory now: malloc's bytes in use where glibc reports them, else RSS."""
    in_use = heap_in_use_bytes()
    return rss_bytes() if in_use is None else in_use


def _peak_fn(kind: str) -> tuple[str, Callable[..., Any]] | None:
    """Where the allocator's peak counter is read, if the device has one that can be reset."""
    if kind in ("cpu", "mps"):  # RSS has no resettable counter; MPS keeps no peak
        return None
    found = _fn(kind, "max_memory_allocated")
    return found if found and _fn(kind, "reset_peak_memory_stats") else None


def memory_reporting(device: torch.device) -> str | None:
    """How a window's peak memory is read here, or None when the device cannot report it."""
    if device.type == "cpu":
        return HEAP_METHOD if _mallinfo2() is not None else RSS_METHOD
    found = _peak_fn(device.type)
    return f"{found[0]}.max_memory_allocated ({device.type})" if found else None


def memory_unavailable_reason(device: torch.device) -> str | None:
    """Why memory_reporting is None for this device (None when it reports)."""
    if memory_reporting(device) is not None:
        return None
    if device.type == "mps":
        return ("torch.mps keeps no peak statistic (only current_allocated_memory and "
                "driver_allocated_memory)")
    if backend(device.type) is None and _accelerator_fn(device.type, "synchronize") is None:
        return f"torch.{device.type} is absent in this process: nothing reports its memory"
    return f"torch.{device.type} has no resettable max_memory_allocated in this torch"


def reset_peak(device: torch.device) -> None:
    """Start the allocator's peak counter afresh (no-op where there is none, the CPU too)."""
    found = _peak_fn(device.type)
    if found:
        _fn(device.type, "reset_peak_memory_stats")[1](device)


def allocated_bytes(device: torch.device) -> int | None:
    """Memory held by tensors now (host_memory_bytes on the CPU); None when the device cannot
    say."""
    if device.type == "cpu":
        return host_memory_bytes()
    if device.type == "mps":
        found = _fn("mps", "current_allocated_memory")
        return int(found[1]()) if found else None
    found = _fn(device.type, "memory_allocated")
    return int(found[1](device)) if found else None


def max_allocated_bytes(device: torch.device) -> int | None:
    """The allocator's peak since the last reset_peak; None where there is no such counter
    (the CPU, whose peak PeakMemory samples from host_memory_bytes; MPS; unknown backends)."""
    found = _peak_fn(device.type)
    return int(found[1](device)) if found else None


def empty_cache(device: torch.device) -> None:
    """Give the caching allocator's unused blocks back (no-op on the CPU)."""
    if device.type == "cpu":
        return
    found = _fn(device.type, "empty_cache")
    if found:
        found[1]()


def name(device: torch.device) -> str:
    """The accelerator's name as its backend gives it (torch.cuda, torch.xpu), else the type."""
    fn = getattr(backend(device.type), "get_device_name", None)
    return str(fn(device)) if fn is not None else device.type


def total_memory_bytes(device: torch.device) -> int | None:
    """The accelerator's total memory from its backend's device properties (torch.cuda,
    torch.xpu), or None (the CPU, MPS, unknown backends)."""
    fn = getattr(backend(device.type), "get_device_properties", None)
    return getattr(fn(device), "total_memory", None) if fn is not None else None
