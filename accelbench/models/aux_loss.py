"""The load-balancing loss of an MoE layer and how its gradient reaches the router."""

from __future__ import annotations

from collections.abc import Callable

import torch

from accelbench.models.moe_routing import Routing


class AuxLossGradScale:
    """The factor the backward under way gives the model's loss (1 / accumulation steps, an fp16
    loss scale): the aux losses' gradients are their weight times it. One per model, shared by
    its MoE layers; 0 until a loss sets it, so a backward of the logits alone adds none."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: torch.Tensor | float = 0.0


class AuxLossAutoScaler(torch.autograd.Function):
    """Identity on an MoE layer's output; its backward also gives the layer's aux loss the
    gradient weight x scale.value, read when the backward runs (Megatron-Core's technique)."""

    @staticmethod
    def forward(ctx, output: torch.Tensor, aux_loss: torch.Tensor, weight: float,
                scale: AuxLossGradScale) -> torch.Tensor:
        ctx.weight, ctx.scale = weight, scale
        ctx.aux_dtype, ctx.aux_device = aux_loss.dtype, aux_loss.device  # nothing saved
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        value = ctx.scale.value  # a tensor on the loss's device, or a stage's float: no copy
        if isinstance(value, torch.Tensor):
            grad_aux = (value * ctx.weight).to(ctx.aux_dtype).reshape(())
        else:
            grad_aux = torch.full((), value * ctx.weight, dtype=ctx.aux_dtype,
                                  device=ctx.aux_device)
        return grad_output, grad_aux, None, None


class LossGradProbe(torch.autograd.Function):
    """The model's loss plus the (detached) aux term, for its value; in backward it records the
    gradient the loss receives, before any MoE layer's backward (they all lie upstream)."""

    @staticmethod
    def forward(ctx, loss: torch.Tensor, aux_term: torch.Tensor,
                scale: AuxLossGradScale) -> torch.Tensor:
        ctx.scale = scale
        return loss + aux_term

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ctx.scale.value = grad.detach()
        return grad, None, None


@torch._disable_dynamo  # run eagerly: the scale is read when the backward runs, not traced
def scale_aux_loss(output: torch.Tensor, aux_loss: torch.Tensor, weight: float,
                   scale: AuxLossGradScale) -> torch.Tensor:
    """`output`, whose backward also backpropagates weight x scale.value into `aux_loss`."""
    return AuxLossAutoScaler.apply(output, aux_loss, weight, scale)


@torch._disable_dynamo
def with_aux_term(loss: torch.Tensor, aux_term: torch.Tensor,
                  scale: AuxLossGradScale) -> torch.Tensor:
    """loss + aux_term (detached) as the value; its backward sets scale.value to the loss's
    gradient, which the layers' AuxLossAutoScaler multiply their weights by."""
    return LossGradProbe.apply(loss, aux_term.detach(), scale)


def load_balancing_loss(scores: torch.Tensor, routing: Routing, top_k: int,
                        sequence_sum: Callable[[torch.Tensor], torch.Tensor] | None = None
                        ) -> torch.Tensor:
    """E x sum_e f_e P_e: f_e the share of tokens whose top k held e (drops included), P_e the
    mean (per-token normalised) score of e. Under sequence parallelism (routing of the whole
    sequence, whole_sequence) P_e sums the tp ranks' shards, so each computes the one loss."""
    n_experts = scores.shape[-1]
    chosen = (routing.tokens_per_expert + routing.dropped_per_expert).to(scores.dtype)
    fraction = chosen / routing.n_tokens
    probs = scores / scores.sum(-1, keepdim=True)
    mean = probs.mean(0) if sequence_sum is None else sequence_sum(probs.sum(0)) / routing.n_tokens
    return n_experts * torch.sum(fraction * mean)
