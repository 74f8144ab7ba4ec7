"""Check probes of the device itself: its table row, memory statistics, timing, energy counter."""

from __future__ import annotations

import time

import torch

from accelbench.bench.check_probe import CheckSettings, Found, NotHere, sync_device, timed_s


def probe_device(s: CheckSettings) -> Found:
    """The device's name, and the hardware-table row it matches (or why none)."""
    from accelbench.hardware.detect import detect_spec, device_name

    name = device_name(s.device)
    spec = detect_spec(s.device)
    if spec is not None:
        return f"{name} ({s.device}) -> {spec.key}", {"name": name, "spec": spec.key}
    why = ("CPUs have no row: MFU uses a measured GEMM peak" if s.device.type == "cpu"
           else "no row in the hardware table: MFU uses a measured GEMM peak")
    return f"{name} ({s.device}) -> none ({why})", {"name": name, "spec": None}


def probe_memory(s: CheckSettings) -> Found:
    """The allocator's peak counter sees a 64 MiB tensor (malloc's bytes in use on a CPU)."""
    from accelbench.hardware import device as devices

    how = devices.memory_reporting(s.device)
    if how is None:
        raise NotHere(devices.memory_unavailable_reason(s.device) or "no memory statistics")
    size = 64 * 2**20
    devices.reset_peak(s.device)
    held = torch.empty(size, dtype=torch.uint8, device=s.device).fill_(1)
    sync_device(s.device)
    peak = devices.max_allocated_bytes(s.device)
    now = devices.allocated_bytes(s.device)
    del held
    if peak is None:  # the CPU: PeakMemory samples host memory, there is no counter to reset
        return f"{how}: {now / 2**20:.0f} MiB now", {"method": how, "allocated_bytes": now}
    if peak < size:
        raise RuntimeError(f"peak {peak} B is below the 64 MiB tensor just made ({how})")
    return (f"{how}: peak {peak / 2**20:.0f} MiB with a 64 MiB tensor held",
            {"method": how, "peak_bytes": peak})


def probe_timing(s: CheckSettings) -> Found:
    """Windows are timed as the runner times them and a matmul takes a positive time."""
    from accelbench.hardware import device as devices

    a = torch.randn(s.matmul_n, s.matmul_n, device=s.device)
    seconds = timed_s(s, lambda: a @ a, 3)
    how = ("device events" if devices.has_timing_events(s.device)
           else "synchronise + perf_counter")
    if not seconds > 0:
        raise RuntimeError(f"a {s.matmul_n}^3 matmul timed {seconds} s by {how}")
    return f"{how}: {s.matmul_n}^3 matmul {seconds * 1e3:.3f} ms", {"method": how}


def probe_energy(s: CheckSettings) -> Found:
    """The energy counter opens, reads, and advances over a short busy window."""
    from accelbench.hardware.energy.choose import open_source
    from accelbench.hardware.energy.source import Unavailable

    source = open_source(s.device)
    if isinstance(source, Unavailable):
        raise NotHere(source.reason)
    try:
        first = sum(source.read_j())
        window = max(s.energy_window_s, 5 * source.interval_s)
        a = torch.randn(s.matmul_n, s.matmul_n, device=s.device)
        end = time.perf_counter() + window
        while time.perf_counter() < end:
            a = (a @ a).clamp_(-1, 1)
            sync_device(s.device)
        joules = sum(source.read_j()) - first
    finally:
        source.close()
    if not joules > 0:
        raise RuntimeError(f"{source.name}: counter did not advance over {window:.2f} s")
    return (f"{source.name}: {joules:.2f} J over {window:.2f} s ({', '.join(source.devices)})",
            {"source": source.name, "joules": joules})
