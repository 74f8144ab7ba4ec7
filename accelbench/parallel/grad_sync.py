"""Data parallel (zero 0) for tensor-parallel models: DDP does not take DTensor parameters.

Each parameter's post-accumulate-grad hook counts it in; when the last micro-batch's backward
has produced every gradient, one flat all-reduce over the dp group averages the local pieces
(a DTensor gradient's local shard is what this tp rank holds, and the tp ranks of one dp
replica hold disjoint or partial pieces, so averaging each over dp is the data-parallel mean).
Not overlapped with the backward: correct first, one collective per step as the analytics count.

Expert parallelism (parallel/expert.py) uses it too, with DDP's place: the dense gradients are
averaged over dp as above; each expert-parallel rank's expert gradients already sum the tokens
of its ep group (the all-to-all's backward brought them), so they are summed over the
expert-data-parallel group (the dp / ep ranks holding the same experts) and divided by dp.

Sequence parallelism with MoE layers (parallel/tp.py): each tp rank's MoE parameters saw only
its sequence shard's tokens, so their gradients are first summed over the tp group (then
averaged over dp or expert data parallel as above); this runs at dp = 1 too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch import nn

from accelbench.parallel.dtensors import local_tensor
from accelbench.parallel.expert import is_expert_param


def average_grads(params: list[nn.Parameter], group: dist.ProcessGroup, size: int) -> None:
    """One flat all-reduce of these parameters' local gradients over `group`, then the mean;
    nothing over a group of one with nothing to divide (sp's MoE sum at dp = 1 skips the rest)."""
    grads = [local_tensor(p.grad) for p in params if p.grad is not None]
    if not grads or (size == 1 and dist.get_world_size(group) == 1):
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=group)
    if size != 1:
        flat /= size
    for g, piece in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
        g.copy_(piece.view_as(g))


class DataParallelGradSync:
    """All-reduce the gradients over dp once per step, after the last micro-batch's backward;
    expert-parallel experts' over `expert_group` (expert data parallel), also divided by dp;
    `sequence_params` (sp's MoE parameters) summed over `sequence_group` (tp) first."""

    def __init__(self, module: nn.Module, group: dist.ProcessGroup, size: int,
                 expert_group: dist.ProcessGroup | None = None,
                 sequence_params: list[nn.Parameter] | None = None,
                 sequence_group: dist.ProcessGroup | None = None) -> None:
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.group, self.size = group, size
        self.sequence_params, self.sequence_group = sequence_params or [], sequence_group
        expert = [expert_group is not None and is_expert_param(p) for p in self.params]
        self.buckets = [([p for p, e in zip(self.params, expert, strict=True) if not e], group),
                        ([p for p, e in zip(self.params, expert, strict=True) if e], expert_group)]
        self.sync, self._ready = True, 0
        for p in self.params:
            p.register_post_accumulate_grad_hook(self._on_grad)

    def _on_grad(self, _param: torch.Tensor) -> None:
        """Count a finished gradient; the last one of a syncing backward starts the reduce."""
        if not self.sync:
            return
        self._ready += 1
        if self._ready == len(self.params):
            self._ready = 0
            if self.sequence_params:  # a sum (size 1): each tp rank's shard of the tokens
                average_grads(self.sequence_params, self.sequence_group, 1)
            for params, group in self.buckets:
                if params:
                    average_grads(params, group, self.size)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Accumulate locally (earlier micro-batches of a step), as DDP's no_sync does."""
        self.sync, self._ready = False, 0
        try:
            yield
        finally:
            self.sync = True
