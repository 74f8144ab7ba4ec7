"""The optimizer set-up of GPT pretraining: AdamW with decoupled weight decay and a schedule."""

from __future__ import annotations

import math

import torch
from torch import nn


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices and embeddings; leave biases and norm weights undecayed (GPT-2 practice)."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def make_adamw(model: nn.Module, lr: float, weight_decay: float,
               device: torch.device) -> tuple[torch.optim.AdamW, str]:
    """AdamW, fused where this torch and device have the kernel, else foreach; says which."""
    groups = param_groups(model, weight_decay)
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True), "fused"
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8,
                                 foreach=device.type != "cpu" or None), "foreach"


def lr_at(step: int, lr: float, warmup_steps: int, total_steps: int,
          min_lr_ratio: float) -> float:
    """Linear warm-up to lr, then cosine decay to min_lr_ratio * lr at total_steps."""
    if warmup_steps and step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
