"""Every rank's measurements, gathered to rank 0 (combined by bench.train.metrics, where one
device is the one-rank case)."""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import torch.distributed as dist

T = TypeVar("T")


def gather_rank_results(local: T) -> list[T]:
    """Every rank's result (any picklable object: the runner's RankResult, a test worker's
    dict), in rank order (all_gather_object: each rank gets the list; rank 0 records it). A
    single process without a group gets [a copy of local]."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [copy.copy(local)]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, local)
    return out
