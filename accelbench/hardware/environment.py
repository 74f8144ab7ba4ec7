"""Everything a result needs to be reproduced and compared: device, software, host, revision."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path

import torch

import accelbench
from accelbench.hardware import device as devices
from accelbench.hardware.detect import cpu_model_name, detect_spec, device_name


def git_revision() -> str:
    """The project's git revision (with '-dirty' if modified), or 'unknown' outside a checkout."""
    root = Path(accelbench.__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + ("-dirty" if dirty else "")


def nvidia_driver_version() -> str | None:
    """The NVIDIA kernel driver version, read from /proc without needing nvidia-smi."""
    path = Path("/proc/driver/nvidia/version")
    if not path.exists():
        return None
    first = path.read_text(errors="replace").splitlines()[0]
    for token in first.split():
        if token[:1].isdigit() and "." in token:
            return token
    return first


def device_count(device: torch.device) -> int:
    """How many devices of this kind the process can see (at least the one it runs on)."""
    return max(devices.device_count(device.type), 1)


def environment(device: torch.device) -> dict:
    """A snapshot of the machine and software for a result record."""
    cuda = device.type == "cuda"
    spec = detect_spec(device)
    return {
        "device_type": device.type,
        "device_name": device_name(device),
        "device_count": device_count(device),
        "device_spec_key": spec.key if spec else None,
        "device_capability": list(torch.cuda.get_device_capability(device)) if cuda else None,
        "driver_version": nvidia_driver_version() if cuda else None,
        "cuda_runtime": torch.version.cuda,
        "hip_runtime": getattr(torch.version, "hip", None),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": cpu_model_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "host": socket.gethostname(),
        "os": platform.platform(),
        "accelbench": accelbench.__version__,
        "git_revision": git_revision(),
    }
