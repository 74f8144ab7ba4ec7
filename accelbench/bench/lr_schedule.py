"""The learning-rate schedule of GPT pretraining (the optimizer itself: parallel.optim)."""

from __future__ import annotations

import math


def lr_at(step: int, lr: float, warmup_steps: int, total_steps: int,
          min_lr_ratio: float) -> float:
    """Linear warm-up to lr, then cosine decay to min_lr_ratio * lr at total_steps."""
    if warmup_steps and step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
