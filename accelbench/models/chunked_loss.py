"""The output head and its cross-entropy in one chunked pass (`--loss-impl chunked`): the
logits of the whole micro-batch are never held at once.

The standard path (models/gpt.py) writes the head's logits, (tokens x 50,257) at 16 bits, casts
them to fp32 for the loss and keeps both for the backward: at GPT-2 XL's micro-batch 32 that is
3.3 GB of bf16 logits and 6.6 GB of fp32 ones, each streamed several times. Here the tokens are
cut into chunks; each chunk's logits are made, turned into their loss and into the gradient of
the loss with respect to them (softmax minus one-hot), and that gradient is multiplied back at
once into the gradients of the head's input and weight, as Liger-Kernel's fused linear
cross-entropy does. The backward only scales those gradients by the incoming one. The GEMMs are
the same three the head's forward and backward run (the same FLOPs); the logits' memory is one
chunk's.

The chunk's GEMMs run in the autocast dtype when autocast is on (the weight cast once a call,
not once a chunk), else in the input's dtype; the softmax and the loss in fp32 as the standard
path's `.float()` does; the weight's gradient accumulates over chunks in fp32.
"""

from __future__ import annotations

import torch
from torch import nn

CHUNK_TOKENS = 4096  # tokens a chunk: (4096 x 50,257) fp32 logits are 0.8 GB


def _compute_dtype(h: torch.Tensor) -> torch.dtype:
    """The GEMMs' dtype: autocast's where it is on (as nn.Linear would run), else h's."""
    kind = h.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else h.dtype


class _LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of (h @ weight[:vocab].T) against targets, gradients made chunk by
    chunk in the forward and scaled in the backward."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                vocab_size: int, chunk_tokens: int) -> torch.Tensor:
        dtype = _compute_dtype(h)
        with torch.autocast(h.device.type, enabled=False):
            w = weight[:vocab_size].to(dtype)
            x_all = h.to(dtype)
            grad_h = torch.empty_like(h)
            grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
            total = torch.zeros((), dtype=torch.float32, device=h.device)
            for start in range(0, h.shape[0], chunk_tokens):
                x = x_all[start:start + chunk_tokens]
                t = targets[start:start + chunk_tokens]
                total += _chunk(x, w, t, grad_h[start:start + chunk_tokens], grad_w[:vocab_size])
        ctx.save_for_backward(grad_h, grad_w)
        ctx.count, ctx.weight_dtype = h.shape[0], weight.dtype
        return total / h.shape[0]

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        grad_h, grad_w = ctx.saved_tensors
        scale = grad_out / ctx.count
        return grad_h * scale, (grad_w * scale).to(ctx.weight_dtype), None, None, None


def _chunk(x: torch.Tensor, w: torch.Tensor, t: torch.Tensor, grad_h_out: torch.Tensor,
           grad_w: torch.Tensor) -> torch.Tensor:
    """One chunk: its summed loss; the gradients of that sum written into grad_h_out and
    added into grad_w (fp32)."""
    logits = (x @ w.t()).float()
    lse = torch.logsumexp(logits, dim=-1)
    loss = (lse - logits.gather(1, t[:, None]).squeeze(1)).sum()
    grad = logits.sub_(lse[:, None]).exp_()  # softmax, in place of the logits
    grad[torch.arange(t.shape[0], device=t.device), t] -= 1.0
    grad = grad.to(x.dtype)
    grad_h_out.copy_(grad @ w)
    grad_w.add_(grad.t() @ x)
    return loss


def chunked_cross_entropy(h: torch.Tensor, head: nn.Linear, targets: torch.Tensor,
                          vocab_size: int, chunk_tokens: int = CHUNK_TOKENS) -> torch.Tensor:
    """Mean cross-entropy of the head's logits over the real vocabulary (its padding rows left
    out, as vocab_logits cuts them) for h (..., d_model) and targets (...): the value and
    gradients of F.cross_entropy(vocab_logits(head(h)).float(), targets)."""
    if head.bias is not None:
        raise ValueError("the chunked loss takes a head without bias (GPT's lm_head)")
    flat = h.reshape(-1, h.shape[-1])
    return _LinearCrossEntropy.apply(flat, head.weight, targets.reshape(-1), vocab_size,
                                     chunk_tokens)
