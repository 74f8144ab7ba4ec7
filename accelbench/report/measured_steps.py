"""This machine's measured cells and profiles from a results store, in the form
analytics/measured_step_runs.py validates: block and training records on a device with no
datasheet row (a CPU), each with its measured seconds, and the profiles by thread count."""

from __future__ import annotations

from accelbench.analytics.machine_profile import MachineProfile
from accelbench.analytics.measured_step_runs import StepRun
from accelbench.config.model import ModelConfig
from accelbench.config.record_kinds import record_kinds
from accelbench.config.records.block import BlockReading
from accelbench.report.cells import compared_figure
from accelbench.report.stored_profile import PROFILE_KIND, load_profile
from accelbench.store.record import Record
from accelbench.store.store import ResultStore


def _threads(record: Record, n_devices: int) -> int:
    """Torch threads a process of the run had: one a launched rank (as calibrate --threads 1
    measures it), else the environment's count (block and train metrics declare none)."""
    if n_devices > 1:
        return 1
    return int(record.environment.get("torch_threads") or 1)


def step_run(record: Record) -> StepRun | None:
    """A successful cell compared across machines (a block or training record: its kind
    declares the timed unit it is compared on) without a datasheet row, as a StepRun; None for
    any other record."""
    figure = compared_figure(record) if record.status == "ok" else None
    if figure is None or record.environment.get("device_spec_key") or record.setup.model is None:
        return None
    s, m = record.setup, record.typed
    measured, n = figure.median_s, int(figure.devices)
    if isinstance(m, BlockReading):
        mb, gas, layout = s.batch, 1, {}
    else:
        mb, gas, layout = s.micro_batch, s.gas or 1, dict(s.layout or {})
    if not measured or not mb:
        return None
    return StepRun(kind=record.kind, model=ModelConfig(**s.model), seq_len=s.seq_len,
                   micro_batch=mb, gas=gas, dtype=s.dtype, n_devices=n, layout=layout,
                   recompute=s.recompute or "none", threads=_threads(record, n),
                   measured_s=float(measured), record_id=record.id)


def measured_step_runs(store: ResultStore) -> list[StepRun]:
    """Every measured cell of this kind in the store, oldest first."""
    compared = (kind for kind, declared in record_kinds().items() if declared.compared)
    runs = (step_run(r) for kind in compared for r in store.query(kind=kind))
    return sorted((r for r in runs if r is not None), key=lambda r: r.record_id)


def profiles_by_threads(store: ResultStore) -> dict[int, MachineProfile]:
    """The newest measured profile at each thread count."""
    out: dict[int, MachineProfile] = {}
    for record in sorted(store.query(kind=PROFILE_KIND, status="ok"), key=lambda r: -r.id):
        threads = int(record.typed.threads or 0)
        if threads and threads not in out:
            out[threads] = load_profile(store, record.id)
    return out
