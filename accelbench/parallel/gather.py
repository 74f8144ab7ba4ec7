"""One record from many ranks: gather every rank's measurements and combine them honestly.

Rules (issue 4): counts sum over the ranks that own distinct data; memory is kept per rank and
its maximum reported; throughput is never averaged over ranks: the global rate is the global
token count over the slowest rank's median step time (step_time_s_median_max_rank), since a
synchronous step ends with its last rank.
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

COUNT_KEYS = ("tokens", "samples")  # per rank: what this rank's data-parallel replica consumed


def gather_rank_results(local: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank's dict, in rank order (all_gather_object: each rank gets the list; rank 0
    records it). A single process without a group gets [local]."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [dict(local)]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, dict(local))
    return out


def combine_rank_results(results: list[dict[str, Any]],
                         model_parallel_size: int = 1) -> dict[str, Any]:
    """One record from rank dicts holding 'step_time_s', 'tokens', 'samples' and 'mem_*' keys.

    model_parallel_size = tp x pp: that many ranks work on the same tokens, so the summed counts
    are divided by it. Keys: n_ranks, tokens_global, samples_global,
    step_time_s_median_max_rank (the largest of the ranks' step_time_s), step_time_s_per_rank,
    tokens_per_s_global, tokens_per_s_per_device, and for each mem_* key
    its per-rank list '<key>_per_rank' and maximum '<key>_max'.
    """
    if not results:
        raise ValueError("no rank results to combine")
    n = len(results)
    out: dict[str, Any] = {"n_ranks": n}
    for key in COUNT_KEYS:
        if all(key in r for r in results):
            out[f"{key}_global"] = sum(r[key] for r in results) / model_parallel_size
    times = [float(r["step_time_s"]) for r in results if r.get("step_time_s") is not None]
    if times:
        slowest = max(times)
        out["step_time_s_per_rank"] = times
        out["step_time_s_median_max_rank"] = slowest
        for key in COUNT_KEYS:
            if f"{key}_global" in out and slowest > 0:
                out[f"{key}_per_s_global"] = out[f"{key}_global"] / slowest
                out[f"{key}_per_s_per_device"] = out[f"{key}_per_s_global"] / n
    mem_keys = sorted({k for r in results for k in r if k.startswith("mem_")})
    for key in mem_keys:
        values = [r.get(key) for r in results]
        out[f"{key}_per_rank"] = values
        present = [v for v in values if v is not None]
        out[f"{key}_max"] = max(present) if present else None
    return out
