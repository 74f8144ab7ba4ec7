"""The intervals and the envelope the shipped runs' validation gives every prediction; no torch."""

from __future__ import annotations

import math

from accelbench.analytics.efficiency import class_of_key, device_class
from accelbench.analytics.envelope import Envelope, ValidatedRun
from accelbench.analytics.intervals import Residual, conditions, precision_family
from accelbench.analytics.params import active_params
from accelbench.analytics.published_csv import PUBLISHED_RUNS
from accelbench.analytics.published_fit import (
    validate_leave_one_class_out,
    validate_leave_one_source_out,
)
from accelbench.analytics.published_run import OWN_STACK, STACKS, PublishedRun
from accelbench.analytics.source_model import IntervalModel
from accelbench.analytics.validation_rows import ValidationRow


def row_stack(row: ValidationRow) -> str:
    """The software stack of a validation row: its framework's, or accelbench's own runtime
    for a measured run."""
    return STACKS.get(row.framework, OWN_STACK)


def row_residual(row: ValidationRow) -> Residual:
    """A validation row as a residual: log(predicted / observed) MFU (= tokens/s per device),
    its source, its stack and its run's conditions."""
    return Residual(math.log(row.predicted_mfu / row.observed_mfu), row.source_key,
                    conditions(class_of_key(row.device), row.dtype, row.limiter, row.n_devices),
                    f"{row.run_id} {row.name}".strip(), row_stack(row))


def interval_model(rows: list[ValidationRow], extra: tuple[Residual, ...] = (),
                   device: str = "") -> IntervalModel:
    """The intervals of out-of-sample rows (leave-one-source-out ones), with any further
    residuals; `device` names what they stand for beyond an unseen stack."""
    return IntervalModel(tuple(row_residual(r) for r in rows) + extra, device=device)


_SHIPPED: dict[str, object] = {}


def shipped_interval_model() -> IntervalModel:
    """The intervals of the shipped runs' leave-one-source-out residuals (computed once a
    process)."""
    if "sources" not in _SHIPPED:
        _SHIPPED["sources"] = interval_model(validate_leave_one_source_out())
    model = _SHIPPED["sources"]
    assert isinstance(model, IntervalModel)
    return model


def unseen_class_interval_model() -> IntervalModel:
    """The intervals of a device class no published run validates (or compute timed by a
    measured profile): the residuals of each class's runs predicted without any of its
    class's runs (validate_leave_one_class_out), computed once a process. Wider than the
    leave-one-source-out ones: a new class's efficiency is unknown, and so is its error."""
    if "unseen" not in _SHIPPED:
        _SHIPPED["unseen"] = interval_model(validate_leave_one_class_out(),
                                            device="a device class never validated")
    model = _SHIPPED["unseen"]
    assert isinstance(model, IntervalModel)
    return model


def validated_envelope(runs: tuple[PublishedRun, ...] = PUBLISHED_RUNS) -> Envelope:
    """The envelope of the scored published runs: device class, precision, active parameters,
    devices, sequence and observed MFU of each."""
    return Envelope(tuple(
        ValidatedRun(f"{run.run_id} {run.name}".strip(), device_class(run.device),
                     precision_family(run.dtype), float(active_params(run.model)),
                     run.n_devices, run.seq_len, run.published_mfu()) for run in runs))
