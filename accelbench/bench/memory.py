"""Measured peak memory of a window: the CUDA allocator's peak, or sampled RSS on a CPU."""

from __future__ import annotations

import ctypes
import gc
import os
import threading
from types import TracebackType

import torch

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def trim_host_heap() -> None:
    """Hand freed heap pages back to the OS (glibc malloc_trim), so that the RSS a window adds
    is not hidden by memory an earlier cell freed but the allocator kept."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: RSS growth may then under-read
        pass


def rss_bytes() -> int:
    """Resident set size of this process now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE_BYTES


class PeakMemory:
    """Context manager measuring the peak memory a window adds above its start.

    CUDA: torch.cuda.max_memory_allocated (exact for the caching allocator). CPU: RSS sampled
    every `interval_s` by a thread (may miss a spike shorter than the interval).
    """

    def __init__(self, device: torch.device, interval_s: float = 0.002) -> None:
        self.device = device
        self.interval_s = interval_s
        self.peak_bytes: int | None = None
        self.method = "cuda max_memory_allocated" if device.type == "cuda" else "sampled RSS"
        self._stop = threading.Event()
        self._max_rss = 0
        self.base_bytes = 0

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base_bytes = torch.cuda.memory_allocated(self.device)
        else:
            gc.collect()
            trim_host_heap()
            self.base_bytes = self._max_rss = rss_bytes()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def current_peak_bytes(self) -> int:
        """Peak so far above the window's start, for per-step reports inside the window."""
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) - self.base_bytes
        return max(self._max_rss, rss_bytes()) - self.base_bytes

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._max_rss = max(self._max_rss, rss_bytes())

    def __exit__(self, exc_type: type | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = torch.cuda.max_memory_allocated(self.device)
            return
        self._stop.set()
        self._thread.join()
        self._max_rss = max(self._max_rss, rss_bytes())
        self.peak_bytes = self._max_rss
