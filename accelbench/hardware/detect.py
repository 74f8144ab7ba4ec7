"""Find the running device and map it to a row of the spec table (or to none)."""

from __future__ import annotations

import platform
import re
from pathlib import Path

import torch

from accelbench.config.errors import ConfigError
from accelbench.hardware.specs import SPECS, DeviceSpec

DEVICE_CHOICES = ("auto", "cpu", "cuda", "xpu", "mps")

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
    """The torch device for a --device value; 'auto' prefers an accelerator over the CPU."""
    kind = requested.split(":")[0]
    if kind not in DEVICE_CHOICES:
        raise ConfigError("device", f"unknown device {requested!r}", ", ".join(DEVICE_CHOICES))
    if kind == "auto":
        for candidate in ("cuda", "xpu", "mps"):
            module = getattr(torch, candidate, None)
            if module is not None and module.is_available():
                return torch.device(candidate)
        return torch.device("cpu")
    module = getattr(torch, kind, None)
    if kind != "cpu" and (module is None or not module.is_available()):
        raise ConfigError("device", f"{kind} requested but not available here", "auto, cpu")
    return _checked_index(requested, kind, module)


def _checked_index(requested: str, kind: str, module: object) -> torch.device:
    """torch.device(requested), its index checked against the devices there are."""
    try:
        device = torch.device(requested)
    except RuntimeError:
        raise ConfigError("device", f"cannot read {requested!r}",
                          f"{kind} or {kind}:N with N a device index") from None
    count = module.device_count() if kind != "cpu" and hasattr(module, "device_count") else 1
    if device.index is not None and not 0 <= device.index < count:
        raise ConfigError("device", f"{requested!r} names device {device.index} but there are "
                          f"{count}", f"{kind}:0 to {kind}:{count - 1}")
    return device


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
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        return cpu_model_name()
    return device.type


def device_memory_bytes(device: torch.device) -> int | None:
    """Total memory of an accelerator, or None for the CPU (see available_cpu_memory_bytes)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return None


def match_spec(name: str, memory_bytes: int | None = None) -> DeviceSpec | None:
    """The spec row for a device name, or None when the table has no row for it."""
    mem_gb = memory_bytes / 1e9 if memory_bytes else None
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
