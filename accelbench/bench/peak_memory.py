"""Measured peak memory of a window: the device allocator's peak counter, sampled host memory on
a CPU (the process is the device there: malloc's bytes in use, hardware.device.host_memory_bytes),
or "unavailable" where the device keeps no peak."""

from __future__ import annotations

import ctypes
import gc
import threading
from types import TracebackType

import torch

from accelbench.config.records.fields import RSS_METHOD
from accelbench.hardware import device as devices


def trim_host_heap() -> None:
    """Hand freed heap pages back to the OS (glibc malloc_trim), so that where RSS is the
    measure the growth a window adds is not hidden by memory an earlier cell freed but the
    allocator kept (PeakMemory calls it only then: malloc's bytes in use do not count kept
    pages, and a trim walks the whole heap)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: RSS growth may then under-read
        pass


class PeakMemory:
    """Context manager measuring the peak memory a window adds above its start.

    An accelerator: its allocator's max_memory_allocated through hardware.device (exact for a
    caching allocator). CPU: malloc's bytes in use (RSS without glibc) sampled every
    `interval_s` by a thread (may miss a spike shorter than the interval). Not RSS where
    malloc can say: glibc keeps freed blocks of up to 32 MiB resident (its mmap threshold rises
    to the largest block freed), which added 0.1-0.2 GiB, differing between runs, to the RSS of
    gpt2-tiny micro-batch-1 cells whose tensors peak at 0.2 GiB (docs/metrics.md); the
    accelerators' counters likewise count allocated, not cached, memory. A device with no peak
    counter (MPS, an unknown backend): peak_bytes None and method "unavailable: <why>", never
    the host's RSS.
    """

    def __init__(self, device: torch.device, interval_s: float = 0.002) -> None:
        self.device = device
        self.interval_s = interval_s
        self.peak_bytes: int | None = None
        reporting = devices.memory_reporting(device)
        self.method = reporting or f"unavailable: {devices.memory_unavailable_reason(device)}"
        self._host = device.type == "cpu"
        self._counter = reporting is not None and not self._host
        self._stop = threading.Event()
        self._max_host = 0
        self.base_bytes = 0

    def __enter__(self) -> PeakMemory:
        if self._counter:
            devices.synchronize(self.device)
            devices.reset_peak(self.device)
            self.base_bytes = devices.allocated_bytes(self.device) or 0
        elif self._host:
            gc.collect()
            if self.method == RSS_METHOD:
                trim_host_heap()
            self.base_bytes = self._max_host = devices.host_memory_bytes()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def current_peak_bytes(self) -> int | None:
        """Peak so far above the window's start, for per-step reports inside the window;
        None where the device cannot report it (as peak_bytes will be)."""
        if self._counter:
            return devices.max_allocated_bytes(self.device) - self.base_bytes
        if self._host:
            return max(self._max_host, devices.host_memory_bytes()) - self.base_bytes
        return None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._max_host = max(self._max_host, devices.host_memory_bytes())

    def __exit__(self, exc_type: type | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._counter:
            devices.synchronize(self.device)
            self.peak_bytes = devices.max_allocated_bytes(self.device)
        elif self._host:
            self._stop.set()
            self._thread.join()
            self._max_host = max(self._max_host, devices.host_memory_bytes())
            self.peak_bytes = self._max_host
