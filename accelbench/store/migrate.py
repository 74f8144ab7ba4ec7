"""Stored records brought to the current schema as they are read; the stored rows never change.

Version 1 -> 2 (config/records/): block and train metrics take the declared names, with scope in
each (`tokens_per_step` -> `tokens_per_step_global`, `peak_flops_per_s` ->
`peak_flops_per_s_per_device`, ...); memory becomes per rank (a single device is rank 0) with the
worst rank's addition named; duplicates the multi-process records kept beside their lists go;
every declared name missing becomes None. Longest-sequence probes ('seq-search') take the per-rank
memory names; other kinds (scale summaries) keep their metrics. A key this module does not know is
kept as it was, never dropped.
"""

from __future__ import annotations

from typing import Any

from accelbench.config.record_kinds import SCHEMA_VERSION, metric_names

V1_RENAMED = {  # block and train metrics
    "tokens_per_step": "tokens_per_step_global",
    "model_flops_per_step": "model_flops_per_step_global",
    "hardware_flops_per_step": "hardware_flops_per_step_global",
    "peak_flops_per_s": "peak_flops_per_s_per_device",
    "mem_estimate_bytes": "mem_estimate_bytes_per_rank",
    "step_time_s_per_rank": "step_time_s_median_per_rank",
    "pipeline_bubble_theory": "pipeline_bubble_fraction_theory",
    "samples_global": "samples_per_step_global",
}
# multi-process duplicates: n_devices, tokens_per_step, step_time_s_median, the lists' maxima
V1_DROPPED = ("n_ranks", "tokens_global", "step_time_s_median_max_rank", "mem_peak_bytes_max",
              "mem_base_bytes_max")
V1_SEARCH_RENAMED = {"mem_estimate_bytes": "mem_estimate_bytes_per_rank",
                     "mem_budget_bytes": "mem_budget_bytes_per_rank"}


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """A record's JSON dict at the current schema version (a new dict; `data` is not changed)."""
    version = data.get("schema_version", 1)
    if version >= SCHEMA_VERSION:
        return data
    if version == 1:
        data = _v1_to_v2(data)
    return data


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    kind, metrics = data.get("kind"), data.get("metrics") or {}
    if kind in ("block", "train") and metrics:  # a cell that measured nothing declares nothing
        metrics = v1_metrics(kind, metrics, data.get("spec") or {})
    elif kind == "seq-search":
        metrics = {V1_SEARCH_RENAMED.get(k, k): v for k, v in metrics.items()}
    return {**data, "metrics": metrics, "schema_version": 2}


def v1_metrics(kind: str, old: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A version-1 block or train record's metrics under the version-2 names: every declared
    name, in declared order, then any key this migration does not know."""
    m = {k: v for k, v in old.items() if k not in V1_DROPPED}
    memory = _v1_memory(m)
    renamed = {V1_RENAMED.get(k, k): v for k, v in m.items()} | memory
    if kind == "train":
        _v1_train_fill(renamed, spec)
    declared = metric_names(kind)
    out = {name: renamed.pop(name, None) for name in declared}
    return out | renamed


def _v1_memory(m: dict[str, Any]) -> dict[str, Any]:
    """Pop the version-1 memory keys from `m`; return the per-rank fields. A single device had
    scalars (rank 0); multi-process records had per-rank lists beside the worst rank's scalars
    (mem_peak_rank), which the lists reproduce."""
    measured = "mem_peak_bytes" in m
    peak, base = m.pop("mem_peak_bytes", None), m.pop("mem_base_bytes", None)
    m.pop("mem_peak_rank", None)
    peaks, bases = m.pop("mem_peak_bytes_per_rank", None), m.pop("mem_base_bytes_per_rank", None)
    if peaks is None:
        if not measured:  # a refusal or a diverged cell: no window was measured
            return {}
        peaks, bases = [peak], [base]
    bases = bases if bases is not None else [None] * len(peaks)
    added = {rank: p - b for rank, (p, b) in enumerate(zip(peaks, bases, strict=False))
             if p is not None and b is not None}
    worst = max(added, key=added.__getitem__) if added else None
    return {"mem_peak_bytes_per_rank": peaks, "mem_base_bytes_per_rank": bases,
            "mem_added_bytes_per_rank_max": added.get(worst), "mem_added_max_rank": worst}


def _v1_train_fill(m: dict[str, Any], spec: dict[str, Any]) -> None:
    """What version 1 left implicit on one device: samples per step (tokens over the sequence
    length) and the one rank's median step time as the per-rank list."""
    tokens, seq_len = m.get("tokens_per_step_global"), spec.get("seq_len")
    if m.get("samples_per_step_global") is None and tokens is not None and seq_len:
        m["samples_per_step_global"] = int(tokens // seq_len) if tokens % seq_len == 0 else None
    if m.get("step_time_s_median_per_rank") is None and m.get("step_time_s_median") is not None:
        m["step_time_s_median_per_rank"] = [m["step_time_s_median"]]
