"""Measured training runs from the store, in the form the planner's validation takes."""

from __future__ import annotations

from accelbench.analytics.measured_runs import MeasuredRun
from accelbench.report.cells import is_training
from accelbench.store.record import Record
from accelbench.store.store import ResultStore


def measured_run(record: Record) -> MeasuredRun | None:
    """One successful training record on a device with a spec row, as the planner's
    validation takes it (model by name); None for any other record (a CPU run: the planner
    has no CPU model to predict it with), and not a sparse cell (the validation predicts dense
    layouts: a 2:4 cell at 0.29x of its dense cell would read as the planner's error)."""
    key = record.environment.get("device_spec_key")
    if (not is_training(record) or record.status != "ok" or not key
            or record.typed.mfu is None or float(record.setup.sparsity or 0)):
        return None
    s = record.setup
    return MeasuredRun(model=s.model_name, seq_len=s.seq_len,
                       micro_batch=s.micro_batch, gas=s.gas, dtype=s.dtype,
                       device_key=key, n_devices=record.typed.n_devices or 1,
                       layout={**(s.layout or {}),
                               "recompute": s.recompute or "none"},
                       mfu=record.typed.mfu, record_id=record.id)


def measured_training_runs(store: ResultStore) -> list[MeasuredRun]:
    """Successful training records on devices with a spec row (the planner needs their peaks)."""
    runs = (measured_run(r) for r in store.query(kind="train", status="ok"))
    return [run for run in runs if run is not None]
