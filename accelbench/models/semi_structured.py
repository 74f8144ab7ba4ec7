"""2:4 sparse kernels in training: the masked block matrices' forward and input-gradient GEMMs
run through torch's semi-structured sparse kernels where the device has them.

Why this shape: GPUs accelerate only 2:4 sparsity. With a transposable 2:4 mask
(models/weight_masks.py) both W and its transpose are 2:4, so the forward y = x W^T multiplies by W
compressed and the input gradient dx = dy W = dy (W^T)^T by W^T compressed; the weight gradient
dW = dy^T x is a product of dense activations and stays a dense GEMM (the step then masks the
weight, as for every sparse cell). The weights change at every step, so both compressions are
made again at every forward: their cost is part of the measured step, as in torchao's sparse
training. Where no kernel applies (a CPU, an older GPU, fp32, tensor-parallel or FSDP weights,
torch.compile) the cell runs masked dense and its record says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.models.weight_masks import is_sparse_weight

Compress = Callable[[torch.Tensor], torch.Tensor]
KERNEL_DTYPES = ("bf16", "fp16")
MIN_DIM = 64  # rows and columns of W and W^T: multiples of the kernels' 32 x 64 minimum


def _compress(weight: torch.Tensor) -> torch.Tensor:
    """torch's semi-structured (2:4) compression of a 2-D CUDA weight."""
    return torch.sparse.to_sparse_semi_structured(weight)


def kernel_backend() -> str:
    """The semi-structured backend to_sparse_semi_structured picks: cuSPARSELt unless
    SparseSemiStructuredTensor._FORCE_CUTLASS is set (it never falls back to CUTLASS by
    itself: without cuSPARSELt in the build, compression fails)."""
    forced = torch.sparse.SparseSemiStructuredTensor._FORCE_CUTLASS
    return "cutlass" if forced else "cusparselt"


def kernel_label() -> str:
    """What a record says ran."""
    return (f"torch semi-structured 2:4 ({kernel_backend()}): forward and input-gradient GEMMs "
            "of the block matrices; weight gradients dense")


def sparse_linears(parts: list[nn.Module]) -> Iterator[tuple[str, nn.Linear]]:
    """The linear layers whose weights are masked (the blocks' matrices)."""
    for part in parts:
        for name, module in part.named_modules():
            if isinstance(module, nn.Linear) and is_sparse_weight(f"{name}.weight"):
                yield name, module


def device_problem(device: torch.device, dtype: str) -> str | None:
    """Why this device and precision have no 2:4 training kernel, or None."""
    if device.type != "cuda":
        return f"{device.type} (torch's 2:4 semi-structured kernels are CUDA-only)"
    if not hasattr(torch.sparse, "to_sparse_semi_structured"):
        return f"cuda: this torch {torch.__version__} has no to_sparse_semi_structured"
    major, minor = torch.cuda.get_device_capability(device)
    if major < 8:
        return f"cuda capability {major}.{minor} (sparse tensor cores start at 8.0)"
    if kernel_backend() == "cusparselt" and not torch.backends.cusparselt.is_available():
        return f"cuda: this torch {torch.__version__} is built without cuSPARSELt"
    if dtype not in KERNEL_DTYPES:
        return f"cuda with {dtype} (the kernels here take {' or '.join(KERNEL_DTYPES)})"
    return None


def layout_problem(tp: int, zero: int, compiled: bool,
                   shapes: list[tuple[int, int]]) -> str | None:
    """Why a cell's layout or shapes keep a capable GPU from the 2:4 kernels, or None."""
    if tp > 1:
        return "tp > 1 (tensor-parallel DTensor weights are not converted)"
    if zero >= 2:
        return f"zero={zero} (FSDP-managed weights are not converted)"
    if compiled:
        return "torch.compile (compiled cells are not converted)"
    odd = [s for s in shapes if s[0] % MIN_DIM or s[1] % MIN_DIM]
    if odd:
        return f"matrix {odd[0]} (both dimensions must be multiples of {MIN_DIM})"
    return None


def two_four_kernel_problem(device: torch.device, dtype: str, tp: int, zero: int,
                            compiled: bool, shapes: list[tuple[int, int]]) -> str | None:
    """Why a 2:4 cell cannot run the sparse kernels (the record's reason), or None."""
    problem = device_problem(device, dtype)
    if problem is None:
        found = layout_problem(tp, zero, compiled, shapes)
        problem = None if found is None else f"cuda with {found}"
    return None if problem is None else f"no sparse kernel ran: masked dense on {problem}"


def _compute_dtype(x: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    """The autocast precision when autocast is on (bf16/fp16 over fp32 master weights)."""
    kind = x.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return weight.dtype


class TwoFourLinear(torch.autograd.Function):
    """y = x W^T + b with W (2:4) compressed; dx through W^T compressed; dW dense."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                compress: Compress) -> torch.Tensor:
        dtype = _compute_dtype(x, weight)
        xc, wc = x.to(dtype).contiguous(), weight.to(dtype)  # the kernels view x as 2-D
        ctx.save_for_backward(xc, wc)
        ctx.compress, ctx.dtypes = compress, (x.dtype, weight.dtype)
        ctx.has_bias = bias is not None
        with torch.autocast(x.device.type, enabled=False):
            y = F.linear(xc, compress(wc), None if bias is None else bias.to(dtype))
        # cuSPARSELt without _FUSE_TRANSPOSE (torch 2.11's default) returns (B,T,N) column-major:
        # q/k/v with last-dim stride B*T rule out the fused attention kernels (math fallback)
        return y.contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        xc, wc = ctx.saved_tensors
        g = grad.to(wc.dtype).contiguous()
        with torch.autocast(g.device.type, enabled=False):
            grad_x = F.linear(g, ctx.compress(wc.t().contiguous())).contiguous()
            g2 = g.reshape(-1, g.shape[-1])
            grad_w = g2.t() @ xc.reshape(-1, xc.shape[-1])
        grad_b = g2.sum(0) if ctx.has_bias else None
        x_dtype, w_dtype = ctx.dtypes
        return (grad_x.to(x_dtype), grad_w.to(w_dtype),
                None if grad_b is None else grad_b.to(w_dtype), None)


def _forward(linear: nn.Linear, compress: Compress, x: torch.Tensor) -> torch.Tensor:
    """A converted layer's forward."""
    return TwoFourLinear.apply(x, linear.weight, linear.bias, compress)


def use_two_four_kernels(parts: list[nn.Module], compress: Compress = _compress) -> int:
    """Route every masked linear of `parts` through TwoFourLinear; the count converted.
    `compress` is torch's semi-structured compression (a test may pass the identity to check
    the gradient algebra on a CPU)."""
    count = 0
    for _, linear in sparse_linears(parts):
        linear.forward = partial(_forward, linear, compress)
        count += 1
    return count


def enable_two_four(module: object, device: torch.device, dtype: str, tp: int, zero: int,
                    compiled: bool) -> tuple[str | None, str | None]:
    """(kernel label, None) after converting a placed 2:4 cell's masked linears, or
    (None, the reason it runs masked dense)."""
    parts = [module] if isinstance(module, nn.Module) else list(module.modules)
    shapes = [tuple(linear.weight.shape) for _, linear in sparse_linears(parts)]
    problem = two_four_kernel_problem(device, dtype, tp, zero, compiled, shapes)
    if problem is not None:
        return None, problem
    use_two_four_kernels(parts)
    return kernel_label(), None
