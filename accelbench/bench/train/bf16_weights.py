"""bf16 compute weights kept between steps, fp32 master weights in the optimizer
(`--compute-weights bf16`), as Megatron trains in bf16.

By default a bf16 cell keeps fp32 weights and autocast casts each one to bf16 every time a
forward uses it (on an H200, 27 ms of a 213 ms GPT-2 XL step went to such copies: 483 a step,
docs/gpu.md). Here the module's parameters become bf16 tensors that the forward and backward use
as they are, and the fp32 parameters the optimizer was built over stay its master weights:

  backward                gradients land in bf16 on the bf16 weights (accumulated there over
                          the micro-batches of a step: Megatron accumulates into an fp32
                          buffer instead; with one micro-batch a step the two are the same)
  clipping                on those bf16 gradients (the global norm summed in fp64, as always)
  before optimizer.step   the bf16 gradients cast into the fp32 masters' .grad (one foreach
                          copy) and freed
  optimizer.step          AdamW on the fp32 masters, unchanged (fused where it was)
  after the step          the masters cast into the bf16 weights (one foreach copy)

One process only (the parameters are swapped after placement: DDP and FSDP2 hold the ones they
wrapped), bf16 cells only, no sparsity; validate refuses the rest in one line.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from accelbench.config.errors import ConfigError, require_choice
from accelbench.config.layout import Layout
from accelbench.config.vocab import COMPUTE_WEIGHTS

ALLOWED = "fp32 (autocast casts fp32 weights), or bf16 on one process with bf16 cells"


def validate_compute_weights(weights: str, dtypes: tuple[str, ...], sparsities: tuple[float, ...],
                             layout: Layout | None, nproc: int) -> None:
    """One line (ConfigError) for a sweep --compute-weights bf16 cannot run."""
    require_choice("compute-weights", weights, COMPUTE_WEIGHTS)
    if weights == "fp32":
        return
    if set(dtypes) != {"bf16"}:
        raise ConfigError("compute-weights", f"bf16 weights with --dtype {','.join(dtypes)} "
                          "(they are the bf16 cells' weights)", ALLOWED)
    if any(sparsities):
        raise ConfigError("compute-weights", "bf16 weights with --sparsity (the masks are kept "
                          "on the fp32 weights)", ALLOWED)
    if nproc > 1 or (layout is not None and (layout.world_size > 1 or layout.zero > 0)):
        raise ConfigError("compute-weights", "bf16 weights on a launched or multi-rank layout "
                          "(DDP and FSDP2 keep the parameters they wrapped)", ALLOWED)


class Bf16WeightsHook:
    """A step hook (bench/train/hooks.py StepHook; not imported: hooks.py registers this one)
    that swaps the placed model's parameters for bf16 copies; the optimizer keeps the fp32
    ones as masters; gradients and weights move between them around each optimizer step."""

    def __init__(self) -> None:
        self.pairs: list[tuple[nn.Parameter, nn.Parameter]] = []  # (bf16 weight, fp32 master)
        self.handle: Any = None

    def built(self, model: nn.Module) -> None:
        """Nothing on the host model: the optimizer must be built over the fp32 weights."""

    def prepare(self, model: nn.Module, device: torch.device) -> None:
        """Nothing before placement (compile traces at the first call, after the swap)."""

    def timed(self) -> None:
        """Nothing at the timed window's start."""

    def placed(self, module: object) -> None:
        """The swap: the optimizer, already built, keeps the fp32 parameters."""
        if not isinstance(module, nn.Module):
            raise ValueError("bf16 compute weights need a module (one process, no pipeline)")
        self.pairs = swap_to_bf16(module)

    def optimizing(self, optimizer: torch.optim.Optimizer) -> None:
        """The gradients' move into the masters, before each step of this optimizer."""
        self.handle = optimizer.register_step_pre_hook(self._grads_to_masters)

    def _grads_to_masters(self, optimizer: object, args: object, kwargs: object) -> None:
        """The bf16 gradients into fp32 .grad of the masters, before AdamW reads them."""
        held = [(w, m) for w, m in self.pairs if w.grad is not None]
        grads = [torch.empty_like(m) for _, m in held]
        if grads:
            torch._foreach_copy_(grads, [w.grad for w, _ in held])
        for (weight, master), grad in zip(held, grads, strict=True):
            master.grad = grad
            weight.grad = None

    def after_optimizer_step(self, trainer: object) -> None:
        """The updated masters into the bf16 weights the next forward uses."""
        with torch.no_grad():
            torch._foreach_copy_([w for w, _ in self.pairs], [m for _, m in self.pairs])

    def result(self, device: torch.device) -> dict[str, Any]:
        """No record fields (the spec records --compute-weights); the optimizer hook off."""
        if self.handle is not None:
            self.handle.remove()
        return {}


def swap_to_bf16(module: nn.Module) -> list[tuple[nn.Parameter, nn.Parameter]]:
    """Every parameter of module replaced by a bf16 copy (a tied one by one copy in each place
    it is used); the (bf16 copy, original) pairs. The originals are left to whoever holds them
    (the optimizer)."""
    copies: dict[int, nn.Parameter] = {}
    pairs = []
    for owner in module.modules():
        for name, param in list(owner._parameters.items()):
            if param is None:
                continue
            copy = copies.get(id(param))
            if copy is None:
                copy = nn.Parameter(param.detach().to(torch.bfloat16),
                                    requires_grad=param.requires_grad)
                copies[id(param)] = copy
                pairs.append((copy, param))
            owner._parameters[name] = copy
    return pairs


def bf16_weights_hook(compute_weights: str) -> Bf16WeightsHook | None:
    """The hook of a cell with --compute-weights bf16, else None."""
    return Bf16WeightsHook() if compute_weights == "bf16" else None
