"""Find the running device and map it to a row of the spec table (or to none)."""

from __future__ import annotations

import platform
import re
from pathlib import Path

import torch

from accelbench.config.vocab import GB
from accelbench.hardware import device as devices
from accelbench.hardware.specs import SPECS, DeviceSpec

# (pattern on the device name, memory range in GB or None, spec key); first match wins.
_NAME_RULES: tuple[tuple[str, tuple[float, float] | None, str], ...] = (
    (r"H100.*PCIe", None, "h100-pcie"),
    (r"H100 NVL|H200 NVL|GH200", None, ""),  # other parts: no spec, not a wrong one
    (r"H100", None, "h100-sxm"),
    (r"H200", None, "h200"),
    (r"B200", None, "b200"),
    (r"A100.*80GB", None, "a100-80gb"),
    (r"A100", (30, 50), "a100-40gb"),
    (r"A100", (70, 90), "a100-80gb"),
    (r"MI300X", None, "mi300x"),
    (r"MI250X/MI250", None, ""),  # ROCm's name for either part: which one is unknown
    (r"MI250X", (0, 70), "mi250x-gcd"),  # torch sees one GCD (64 GB), half a module
    (r"MI250X", None, "mi250x"),
    (r"MI250", (0, 70), "mi250-gcd"),
    (r"MI250", None, "mi250"),
)


def resolve_device(requested: str = "auto") -> torch.device:
    """The torch device for a --device value; 'auto' prefers an accelerator over the CPU.
    (hardware.device.select, under the name its callers use.)"""
    return devices.select(requested)


def cpu_model_name() -> str:
    """The CPU's marketing name from /proc/cpuinfo, or what platform knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})  # x86 AVX-512/AMX; Arm "bf16"


def cpu_has_bf16_matmul(cpuinfo_text: str | None = None) -> bool:
    """Whether the CPU multiplies bf16 in hardware; without it torch emulates bf16 GEMMs, which
    ran ~10x slower than fp32 on an AVX2 EPYC, so defaults leave bf16 out there."""
    if cpuinfo_text is None:
        path = Path("/proc/cpuinfo")
        cpuinfo_text = path.read_text(errors="replace") if path.exists() else ""
    for line in cpuinfo_text.splitlines():
        if line.startswith(("flags", "Features")):
            return bool(BF16_CPU_FLAGS & set(line.split(":", 1)[1].split()))
    return False


def device_name(device: torch.device) -> str:
    """Human name of the device that runs the work."""
    return cpu_model_name() if device.type == "cpu" else devices.name(device)


def device_memory_bytes(device: torch.device) -> int | None:
    """Total memory of an accelerator, or None for the CPU (see available_cpu_memory_bytes)."""
    return devices.total_memory_bytes(device)


def match_spec(name: str, memory_bytes: int | None = None) -> DeviceSpec | None:
    """The spec row for a device name, or None when the table has no row for it."""
    mem_gb = memory_bytes / GB if memory_bytes else None
    for pattern, mem_range, key in _NAME_RULES:
        if not re.search(pattern, name, re.IGNORECASE):
            continue
        if mem_range and (mem_gb is None or not mem_range[0] <= mem_gb <= mem_range[1]):
            continue
        return SPECS[key] if key else None
    return None


def detect_spec(device: torch.device) -> DeviceSpec | None:
    """The spec of the running device; None for CPUs and unknown parts (no invented peak)."""
    if device.type == "cpu":
        return None
    return match_spec(device_name(device), device_memory_bytes(device))


def available_cpu_memory_bytes() -> int:
    """Memory the OS reports as available now (MemAvailable), the CPU's budget for a cell."""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    import os

    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
