"""Causal attention of queries that sit at the end of a longer key sequence, on a CPU, with no
mask tensor: what context parallelism's chunks need (a chunk attends every key before it and
the keys of its own span causally).

torch's lower-right causal bias is a mask tensor off CUDA, kept for the backward (quadratic in
the sequence). Here the keys before the queries are attended whole and the square at the end
causally: two calls of the CPU's flash kernel (memory linear in the keys), merged by their
log-sum-exp as ring attention merges its blocks; the backward is each call's own flash backward
given the merged output and log-sum-exp, which is the exact gradient of each block.
"""

from __future__ import annotations

import torch

_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


class _PrefixCausal(torch.autograd.Function):
    """(batch, heads, n, d) queries against (batch, heads, s + n, d) keys and values: the first
    s keys seen by every query, the last n causally."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        s = k.shape[2] - q.shape[2]
        out, lse = _FLASH(q, k[:, :, s:], v[:, :, s:], 0.0, True)
        if s:
            before, lse_before = _FLASH(q, k[:, :, :s], v[:, :, :s], 0.0, False)
            merged = torch.logaddexp(lse, lse_before)
            out = (out * torch.exp(lse - merged).unsqueeze(-1).to(out.dtype)
                   + before * torch.exp(lse_before - merged).unsqueeze(-1).to(out.dtype))
            lse = merged
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q, k, v, out, lse = ctx.saved_tensors
        grad = grad.contiguous()
        s = k.shape[2] - q.shape[2]
        dq, dk, dv = _FLASH_BACKWARD(grad, q, k[:, :, s:], v[:, :, s:], out, lse, 0.0, True)
        if not s:
            return dq, dk, dv
        dq_before, dk_before, dv_before = _FLASH_BACKWARD(grad, q, k[:, :, :s], v[:, :, :s],
                                                          out, lse, 0.0, False)
        return dq + dq_before, torch.cat([dk_before, dk], 2), torch.cat([dv_before, dv], 2)


def prefix_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(QK^T / sqrt(d)) V for queries aligned at the end of the keys (lower-right causal),
    on a CPU without a mask tensor; fewer key/value heads than query heads are repeated."""
    if k.shape[1] != q.shape[1]:
        k, v = (z.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for z in (k, v))
    return _PrefixCausal.apply(q.contiguous(), k, v)  # k, v: views of the gathered keys
