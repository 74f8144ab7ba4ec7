"""AdamW for a placed model (ZeRO-1 sharded where asked), the global gradient norm, and the
bytes of parameter, gradient and optimizer state each rank really holds."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
import torch.distributed as dist
from torch import nn

from accelbench.config.layout import Layout
from accelbench.config.runtime_settings import LEAN
from accelbench.parallel.dtensors import is_dtensor, local_tensor
from accelbench.parallel.expert import EXPERT_SHARDS_ATTR, is_expert_param

TIED_COPY_ATTR = "accelbench_tied_copy"  # a pipeline's second copy of a tied weight
BETAS = (0.9, 0.95)
EPS = 1e-8


def _unique_params(model: nn.Module) -> list[nn.Parameter]:
    """Trainable parameters, each once."""
    return [p for p in model.parameters() if p.requires_grad]


def param_groups(params: list[nn.Parameter], weight_decay: float) -> list[dict]:
    """Decay matrices and embeddings, not biases and norm weights (GPT-2 practice). Tensor-
    parallel (DTensor) and plain parameters go in groups of their own: a fused or foreach
    kernel runs per group and takes one kind or the other, never a mix."""
    groups = []
    for decayed, decay in ((True, weight_decay), (False, 0.0)):
        for distributed in (True, False):
            chosen = [p for p in params if (p.dim() >= 2) == decayed
                      and is_dtensor(p) == distributed]
            if chosen:
                groups.append({"params": chosen, "weight_decay": decay})
    return groups


def adamw(groups: list[dict], lr: float, zero_group=None,
          bucket_view: bool = True) -> tuple[torch.optim.Optimizer, str]:
    """The one AdamW of every layout and world size: torch's fused kernel where this torch and
    device have it (CPU and CUDA today, DTensor parameters included), else foreach; says which.
    zero_group: shard the state over this data-parallel group (ZeRO-1), its parameters kept as
    views of one flat buffer a device (broadcast bucket by bucket) unless bucket_view is off."""
    errors = []
    for kernel in ("fused", "foreach"):
        options = {"lr": lr, "betas": BETAS, "eps": EPS, kernel: True}
        try:
            if zero_group is not None:
                from torch.distributed.optim import ZeroRedundancyOptimizer  # ~0.7 s: ZeRO-1 only

                return ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW,
                                               process_group=zero_group,
                                               parameters_as_bucket_view=bucket_view,
                                               **options), kernel
            return torch.optim.AdamW(groups, **options), kernel
        except (RuntimeError, ValueError) as err:
            errors.append(f"{kernel}: {err}")
    raise RuntimeError("no AdamW kernel for these parameters: " + "; ".join(errors))


class ExpertZeroOptimizer:
    """ZeRO-1 under expert parallelism: one ZeroRedundancyOptimizer per kind of parameter, each
    over the ranks that hold the same parameters (dense over dp, this rank's experts over the
    expert-data-parallel group), so no rank is handed another rank's experts. Steps, zeroes and
    exposes param_groups (the lr schedule and the fp16 scaler) and state as one optimizer."""

    def __init__(self, parts: list[torch.optim.Optimizer]) -> None:
        self.parts = parts

    @property
    def param_groups(self) -> list[dict]:
        """Every part's groups, the same dicts (an lr set here reaches each part's step)."""
        return [g for part in self.parts for g in part.param_groups]

    @property
    def state(self) -> dict:
        """This rank's AdamW state of its shards of both kinds (each parameter in one part); a
        plain dict, as looking a parameter up in the wrong part's defaultdict would add it."""
        return {p: s for part in self.parts for p, s in part.optim.state.items()}

    def step(self, closure: None = None) -> None:
        """Each part updates its shard and broadcasts it over its own group."""
        for part in self.parts:
            part.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop (or zero) the gradients of every part's parameters."""
        for part in self.parts:
            part.zero_grad(set_to_none=set_to_none)


def _zero_over_expert_groups(params: list[nn.Parameter], weight_decay: float, lr: float,
                             dp_group, edp_group, bucket_view: bool
                             ) -> tuple[ExpertZeroOptimizer, str]:
    """ZeRO-1 with ep: dense parameters' state sharded over dp, experts' over their
    expert-data-parallel group (a part with no parameters, such as a stage without MoE
    layers, is left out)."""
    parts, kernels = [], []
    for expert, group in ((False, dp_group), (True, edp_group)):
        chosen = [p for p in params if is_expert_param(p) == expert]
        if chosen:
            part, kernel = adamw(param_groups(chosen, weight_decay), lr, group, bucket_view)
            parts.append(part)
            kernels.append(kernel)
    return ExpertZeroOptimizer(parts), "/".join(dict.fromkeys(kernels))


def make_optimizer(model: nn.Module, layout: Layout, lr: float, weight_decay: float
                   ) -> tuple[torch.optim.Optimizer | ExpertZeroOptimizer, str]:
    """AdamW over a module from prepare_model or a PipelineRunner, and its label; ZeRO-1 wraps
    it in ZeroRedundancyOptimizer over the dp group (needs the `parallel_mesh` those carry),
    under ep one over dp for the dense parameters and one over the expert-data-parallel group
    for the experts (the `expert_groups` they carry)."""
    params = _unique_params(model)
    if layout.zero != 1:
        optimizer, kernel = adamw(param_groups(params, weight_decay), lr)
        return optimizer, f"AdamW ({kernel})"
    mesh = getattr(model, "parallel_mesh", None)
    if mesh is None:
        raise ValueError("zero=1 needs the model from prepare_model or a PipelineRunner")
    experts = getattr(model, "expert_groups", None)
    views = getattr(model, "runtime_settings", LEAN).zero_views
    if layout.ep > 1:
        if experts is None:
            raise ValueError("zero=1 with ep > 1 needs the expert groups prepare_model or a "
                             "PipelineRunner made")
        optimizer, kernel = _zero_over_expert_groups(params, weight_decay, lr,
                                                     mesh.get_group("dp"), experts.edp_group,
                                                     views)
        return optimizer, f"AdamW ({kernel}) ZeRO-1 sharded (experts over expert data parallel)"
    optimizer, kernel = adamw(param_groups(params, weight_decay), lr, mesh.get_group("dp"), views)
    return optimizer, f"AdamW ({kernel}) ZeRO-1 sharded"


def _local_grad(grad: torch.Tensor) -> tuple[torch.Tensor, int]:
    """This rank's piece of a gradient and into how many distinct shards it is split."""
    if not is_dtensor(grad):
        return grad, 1
    if any(p.is_partial() for p in grad.placements):
        from torch.distributed.tensor import Replicate

        grad = grad.redistribute(grad.device_mesh,
                                 [Replicate() if p.is_partial() else p for p in grad.placements])
    shards = math.prod(grad.device_mesh.size(i) for i, p in enumerate(grad.placements)
                       if not p.is_replicate())  # Shard and FSDP2's _StridedShard
    return grad.to_local(), shards


def grad_norm(params: Iterable[torch.Tensor], layout: Layout) -> torch.Tensor:
    """Global L2 norm of the gradients over all ranks, each parameter counted once.

    Every rank of a pipeline stage (dp x tp of them) holds each of the stage's parameters,
    whole or as one of k shards; a piece is thus held by dp*tp/k ranks, and the squared norms
    summed over the world with that weight count every element once. A pipeline's second copy
    of a tied weight is skipped. An expert-parallel expert weight is held by only 1 / ep of
    them (one rank of each ep group).
    """
    params = [p for p in params if p.grad is not None and not getattr(p, TIED_COPY_ATTR, False)]
    device = params[0].device if params else torch.device("cpu")
    total = torch.zeros((), dtype=torch.float64, device=device)
    holders = layout.dp * layout.tp
    # Norms in the gradients' own precision (no float64 copy of every gradient), summed in
    # float64; plain tensors in one foreach kernel (as torch's own clipping), DTensors each.
    # Grouped by weight (a Python number), not a weight tensor made from a list: that copy
    # from the host would wait for the device inside every timed step.
    by_weight: dict[float, list[torch.Tensor]] = {}
    for p in params:
        if not is_dtensor(p.grad):
            weight = getattr(p, EXPERT_SHARDS_ATTR, 1) / holders
            by_weight.setdefault(weight, []).append(p.grad.detach())
    for weight, grads in by_weight.items():
        norms = torch.stack(torch._foreach_norm(grads))
        total += norms.to(torch.float64).pow(2).sum() * weight
    for p in params:
        if is_dtensor(p.grad):
            local, shards = _local_grad(p.grad)
            total += (torch.linalg.vector_norm(local.detach()).to(torch.float64) ** 2
                      * shards * getattr(p, EXPERT_SHARDS_ATTR, 1) / holders)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(total)
    return total.sqrt()


def clip_grad_norm_(model: nn.Module, max_norm: float, layout: Layout) -> torch.Tensor:
    """Scale all gradients so their global norm is at most max_norm (torch's rule); the norm,
    a tensor on the device. No host sync: the coefficient stays on the device and every
    gradient is multiplied by it (1 when under the limit), as torch's own clipping does; a
    caller that wants the number reads it with float() outside the timed step."""
    params = [p for p in model.parameters() if p.grad is not None]
    norm = grad_norm(params, layout)
    if not params:
        return norm
    coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    # DTensor gradients are scaled through their local shards (views of the same storage):
    # foreach kernels take plain tensors, and a Partial gradient scales as its sum does
    grads = [local_tensor(p.grad) for p in params]
    for dtype in {g.dtype for g in grads}:
        same = [g for g in grads if g.dtype == dtype]
        torch._foreach_mul_(same, coef.to(device=same[0].device, dtype=dtype))
    return norm


def local_state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of parameters, gradients and optimizer state stored on this rank (local shards)."""
    # ZeroRedundancyOptimizer's local AdamW; ExpertZeroOptimizer's state holds both its parts'
    inner = getattr(optimizer, "optim", optimizer)
    out = {"param_bytes": 0, "grad_bytes": 0, "optim_state_bytes": 0}
    for p in model.parameters():
        out["param_bytes"] += _tensor_bytes(p)
        if p.grad is not None:
            out["grad_bytes"] += _tensor_bytes(p.grad)
    for state in inner.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                out["optim_state_bytes"] += _tensor_bytes(value)
    out["total_bytes"] = sum(out.values())
    return out


def _tensor_bytes(t: torch.Tensor) -> int:
    """Storage bytes of a tensor on this rank (a DTensor's local shard)."""
    local = local_tensor(t)
    return local.numel() * local.element_size()
