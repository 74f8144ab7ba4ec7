"""Precision names, their torch dtypes, and whether the running device can execute them (fp8:
natively on float8 matrix units, or in torchao's emulation)."""

from __future__ import annotations

import inspect

import torch

from accelbench.config.errors import ConfigError
from accelbench.config.precision import resolve
from accelbench.config.vocab import DTYPES

_TORCH_DTYPE = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# keyed by config.vocab.DTYPES, in its order; a name added there without a dtype here fails now
TORCH_DTYPES: dict[str, torch.dtype] = {name: _TORCH_DTYPE[name] for name in DTYPES}


def parse_dtype(name: str) -> torch.dtype:
    """torch dtype for a precision name; ConfigError lists the allowed names."""
    try:
        return TORCH_DTYPES[name]
    except KeyError:
        raise ConfigError("dtype", f"unknown dtype {name!r}", ", ".join(DTYPES)) from None


def dtype_support(device: torch.device, name: str) -> str | None:
    """None if the device runs `name`, else the reason it cannot (recorded as 'unsupported')."""
    name = resolve(name).compute  # fp8 without float8 units is emulated (fp8_mode), not refused
    if device.type == "cuda" and name == "bf16" and not cuda_bf16_native(device):
        capability = torch.cuda.get_device_capability(device)
        return f"bf16 needs compute capability 8.0+, this GPU has {capability}"
    if device.type == "mps" and name == "bf16" and not torch.backends.mps.is_macos_or_newer(14, 0):
        return "bf16 on MPS needs macOS 14"
    return None


def cuda_bf16_native(device: torch.device) -> bool:
    """Whether this CUDA device (the one passed, not the current one) has bf16 units: torch's
    is_bf16_supported, asked about `device`, with emulation excluded where its signature has
    `including_emulation` (a V100 or T4 'supports' bf16 by emulating it, far below its fp16
    rate); without it, compute capability 8.0+. ROCm: torch says every GPU does."""
    if torch.version.hip:
        return True
    supported = torch.cuda.is_bf16_supported
    if "including_emulation" not in inspect.signature(supported).parameters:
        return torch.cuda.get_device_capability(device)[0] >= 8
    with torch.cuda.device(device):
        return bool(supported(including_emulation=False))


def set_tf32(device: torch.device, tf32: bool) -> None:
    """Allow or forbid TF32 for fp32 matmuls and convolutions (CUDA only), as --tf32 says: the
    peak an fp32 MFU is divided by follows the same flag."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32


FP8_ROCM_ARCHS = ("gfx940", "gfx941", "gfx942", "gfx950")  # MI300 series and up: float8 cores


def fp8_mode(device: torch.device) -> tuple[str, str]:
    """("native", why) where float8 matmuls run on the device's own units (CUDA capability
    8.9+, MI300 and up), else ("emulated", why): torchao then upcasts the float8 values and
    multiplies in high precision, the numerics of FP8 without its speed."""
    if device.type != "cuda":
        return "emulated", f"{device.type} has no float8 matmul units torch can use"
    if torch.version.hip:
        arch = torch.cuda.get_device_properties(device).gcnArchName
        if any(name in arch for name in FP8_ROCM_ARCHS):
            return "native", f"{arch}: float8 matrix cores"
        return "emulated", f"{arch} has no float8 matrix cores (MI300, gfx94x, and up have)"
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) >= (8, 9):
        return "native", f"compute capability {major}.{minor}: float8 tensor cores"
    return "emulated", f"compute capability {major}.{minor} has no float8 tensor cores (8.9+)"
