"""Precision names, their torch dtypes, and whether the running device can execute them."""

from __future__ import annotations

import torch

from accelbench.config.errors import ConfigError
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
    if device.type == "cuda" and name == "bf16" and not torch.cuda.is_bf16_supported():
        capability = torch.cuda.get_device_capability(device)
        return f"bf16 needs compute capability 8.0+, this GPU has {capability}"
    if device.type == "mps" and name == "bf16" and not torch.backends.mps.is_macos_or_newer(14, 0):
        return "bf16 on MPS needs macOS 14"
    return None


def set_tf32(device: torch.device, tf32: bool) -> None:
    """Allow or forbid TF32 for fp32 matmuls and convolutions (CUDA only), as --tf32 says: the
    peak an fp32 MFU is divided by follows the same flag."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
