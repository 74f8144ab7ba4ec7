"""The dense MLP of a block (GELU or SwiGLU), in its own module so that the mixture of experts
(models/moe.py, whose shared experts are one such MLP) and the decoder (models/gpt.py) share it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.config.model import ModelConfig


class MLP(nn.Module):
    """Two linear layers around a GELU, or SwiGLU: c_fc's fused [gate | up] rows, then
    c_proj(silu(gate) * up)."""

    def __init__(self, cfg: ModelConfig, ffn_dim: int | None = None) -> None:
        super().__init__()
        self.gated = cfg.gated_mlp
        hidden = ffn_dim or cfg.ffn_dim
        width = 2 * hidden if self.gated else hidden
        self.c_fc = nn.Linear(cfg.d_model, width, bias=cfg.bias)
        self.c_proj = nn.Linear(hidden, cfg.d_model, bias=cfg.bias)
        self.approximate = "tanh" if cfg.activation == "gelu_tanh" else "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d_model) -> (..., d_model)."""
        return self.c_proj(activate(self.c_fc(x), self.gated, self.approximate))


def activate(h: torch.Tensor, gated: bool, approximate: str) -> torch.Tensor:
    """The MLP's nonlinearity on c_fc's output: silu(gate) * up for the fused [gate | up] rows
    (this rank's halves under tensor parallelism too), else GELU."""
    if gated:
        gate, up = h.chunk(2, dim=-1)
        return F.silu(gate) * up
    return F.gelu(h, approximate=approximate)
