"""Every rank's measurements, gathered to rank 0 (combined by bench.train.metrics, where one
device is the one-rank case)."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist


def gather_rank_results(local: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank's dict, in rank order (all_gather_object: each rank gets the list; rank 0
    records it). A single process without a group gets [local]."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [dict(local)]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, dict(local))
    return out
