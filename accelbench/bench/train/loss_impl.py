"""`--loss-impl chunked`: the output head and cross-entropy computed chunk by chunk
(models/chunked_loss.py), set on the model as a step hook; the layouts it is built for."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from accelbench.config.errors import ConfigError, require_choice
from accelbench.config.layout import Layout
from accelbench.config.vocab import LOSS_IMPLS

ALLOWED = "torch, or chunked without tensor or pipeline parallelism and at ZeRO 0 or 1"


def validate_loss_impl(impl: str, layout: Layout | None) -> None:
    """One line (ConfigError) for a loss implementation this layout does not run: the pipeline's
    last stage computes its own loss, tensor parallelism wraps the head, and FSDP2's gathered
    head weight has not been tried under it."""
    require_choice("loss-impl", impl, LOSS_IMPLS)
    if impl == "chunked" and layout is not None and (layout.tp > 1 or layout.pp > 1
                                                     or layout.zero >= 2):
        raise ConfigError("loss-impl", f"chunked with layout {layout.label()} is not built",
                          ALLOWED)


class LossImplHook:
    """A step hook (bench/train/hooks.py StepHook; not imported, hooks.py registers it) that
    sets the model's loss implementation on the host model."""

    def __init__(self, impl: str) -> None:
        self.impl = impl

    def built(self, model: nn.Module) -> None:
        """The loss implementation, before the model is placed (placement keeps the flag)."""
        model.set_loss_impl(self.impl)

    def prepare(self, model: nn.Module, device: torch.device) -> None:
        """Nothing on the device."""

    def placed(self, module: object) -> None:
        """Nothing once placed."""

    def optimizing(self, optimizer: torch.optim.Optimizer) -> None:
        """Nothing of the optimizer."""

    def timed(self) -> None:
        """Nothing at the timed window's start."""

    def after_optimizer_step(self, trainer: object) -> None:
        """Nothing after a step."""

    def result(self, device: torch.device) -> dict[str, Any]:
        """No record fields: the spec records --loss-impl."""
        return {}


def loss_impl_hook(impl: str) -> LossImplHook | None:
    """The hook of a cell whose loss is not torch's default, else None."""
    return LossImplHook(impl) if impl != LOSS_IMPLS[0] else None
