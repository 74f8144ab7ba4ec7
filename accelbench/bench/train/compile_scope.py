"""`--compile-scope model`: torch.compile the whole model instead of each block (the default,
`blocks`), as torchao advises for float8 training: a compiled graph that spans the blocks'
edges can fuse the scaling casts and amax reductions into the ops around them (the H200's
profile put 45 ms of casts and 22 ms of amax reductions beside 59 ms of float8 GEMMs,
docs/gpu.md). A step hook: the placement compiles the blocks (parallel/apply.py); once placed,
this hook takes the blocks' compiled wrappers off and compiles the model (one process only,
no pipeline: DDP and FSDP2 wrap what they were given). Recorded as the spec's compile_scope.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from accelbench.config.errors import ConfigError, require_choice
from accelbench.config.layout import Layout
from accelbench.config.vocab import COMPILE_SCOPES

ALLOWED = "blocks, or model with --compile on one process without pipeline stages"
COMPILE_KWARGS: dict[str, Any] = {}  # torch.compile's arguments (inductor: none)


def validate_compile_scope(scope: str, compile_: bool, layout: Layout | None,
                           nproc: int) -> None:
    """One line (ConfigError) for a scope this sweep cannot compile."""
    require_choice("compile-scope", scope, COMPILE_SCOPES)
    if scope == COMPILE_SCOPES[0]:
        return
    if not compile_:
        raise ConfigError("compile-scope", "model without --compile", ALLOWED)
    if nproc > 1 or (layout is not None and (layout.world_size > 1 or layout.zero > 0)):
        raise ConfigError("compile-scope", "model on a launched or multi-rank layout (DDP, "
                          "FSDP2 and pipeline stages keep what they wrapped)", ALLOWED)


def compile_whole(model: nn.Module) -> None:
    """The blocks' own compiled wrappers off, the model compiled as one."""
    for block in getattr(model, "h", ()):
        block._compiled_call_impl = None
    model.compile(**COMPILE_KWARGS)


class CompileScopeHook:
    """A step hook (bench/train/hooks.py StepHook; not imported, hooks.py registers it)."""

    def built(self, model: nn.Module) -> None:
        """Nothing on the host model."""

    def prepare(self, model: nn.Module, device: torch.device) -> None:
        """Nothing before placement."""

    def placed(self, module: object) -> None:
        """The whole placed model compiled (traced at its first call, a warm-up step)."""
        if not isinstance(module, nn.Module):
            raise ValueError("--compile-scope model needs a module (no pipeline stages)")
        compile_whole(module)

    def optimizing(self, optimizer: torch.optim.Optimizer) -> None:
        """Nothing of the optimizer."""

    def timed(self) -> None:
        """Nothing at the timed window's start."""

    def after_optimizer_step(self, trainer: object) -> None:
        """Nothing after a step."""

    def result(self, device: torch.device) -> dict[str, Any]:
        """No record fields: the spec records compile_scope."""
        return {}


def compile_scope_hook(scope: str, compile_: bool) -> CompileScopeHook | None:
    """The hook of a compiled cell whose scope is the whole model, else None."""
    return CompileScopeHook() if compile_ and scope == "model" else None
