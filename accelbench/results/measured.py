"""Measured training runs from the store, in the form the planner's validation takes."""

from __future__ import annotations

from typing import Any

from accelbench.results.store import ResultStore


def measured_training_runs(store: ResultStore) -> list[dict[str, Any]]:
    """Successful training records on devices with a spec row (the planner needs their peaks).

    CPU runs are left out: the planner has no CPU model to predict them with.
    """
    runs = []
    for r in store.query(kind="train", status="ok"):
        key = r.environment.get("device_spec_key")
        if not key or r.metrics.get("mfu") is None:
            continue
        runs.append({"model": r.spec["model_name"], "seq_len": r.spec["seq_len"],
                     "micro_batch": r.spec["micro_batch"], "gas": r.spec["gas"],
                     "dtype": r.spec["dtype"], "device_key": key,
                     "n_devices": r.metrics.get("n_devices") or 1,
                     "layout": {**(r.spec.get("layout") or {}),
                                "recompute": r.spec.get("recompute", "none")},
                     "mfu": r.metrics["mfu"], "record_id": r.id})
    return runs
