"""How a schema module declares a record kind: the class its metrics are written from and read
as, the class its spec reads as, and the facts readers dispatch on instead of testing the kind's
name (config/record_kinds.py assembles the table)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from accelbench.config.records.fields import RecordSpec


def read_fields(cls: type, values: dict[str, Any]) -> Any:
    """`values` as the frozen class `cls`: every declared field, None where the dict lacks it;
    keys `cls` does not declare are left out (kept in the dict, never dropped there)."""
    return cls(**{f.name: values.get(f.name) for f in fields(cls)})


@dataclass(frozen=True)
class ComparedFigure:
    """The figure a cell is compared on across machines (report/compare.py): `amount` of work
    (`unit`s, all devices) done in each timed unit (a training step, a block's forward and
    backward), over that unit's median time and its spread; the rates are amount / time, all
    devices and per device. `mfu` and `tflops` (model TFLOPS per device) where the kind has
    them; `label`: the workload's name in the tables (None: named from its model and shape, as
    block and training cells are)."""

    amount: float | None
    median_s: float | None
    fastest_s: float | None = None
    slowest_s: float | None = None
    iqr_s: float | None = None
    interval: list[float | None] | None = None  # the median time's 95% interval over trials
    devices: int = 1
    unit: str = "token"
    mfu: float | None = None
    tflops: float | None = None
    label: str | None = None


# A kind's compared figure, from a record's typed metrics and spec (record.typed, record.setup)
Compared = Callable[[Any, Any], ComparedFigure]


@dataclass(frozen=True)
class RecordKind:
    """One record kind, declared: `metrics` is the class its records are written from
    (metrics_dict); `reading` the class they read as when not that one, built by `read`
    (block: its phases gathered; scale: its rows as ScaleRow); `extra_names` the metric keys
    it declares beyond the class's fields (block: '<phase>_<field>'); `spec` the class its
    records' spec reads as (`record.setup`); `cell`: its records are cells of a workload,
    compared across machines by their workload identity (store/fingerprint.py; a noise check,
    'noise', and its conditions, 'noise-cell', measured a training configuration and name it
    as a training cell does). `compared`: the figure its cells are compared on across
    machines (None: its records are not in the comparison). `condition`: its records are the
    conditions of another kind's check (noise-cell: an A/A check's A and B, training cells
    shown only through the 'noise' record), never shown as cells of their own.
    `machine_context`: its records tell about the machine more than about one run (a measured
    peak, a noise check and its conditions): a bundle of any run of the machine carries them."""

    metrics: type
    reading: type | None = None
    read: Callable[[dict[str, Any]], Any] | None = None
    extra_names: tuple[str, ...] = ()
    spec: type = RecordSpec
    cell: bool = False
    compared: Compared | None = None
    condition: bool = False
    machine_context: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        """Every metric key a record of this kind declares, in the class's field order."""
        return tuple(f.name for f in fields(self.metrics)) + self.extra_names

    @property
    def read_as(self) -> type:
        """The class a record of this kind reads as."""
        return self.reading or self.metrics

    def read_metrics(self, metrics: dict[str, Any]) -> Any:
        """A record's metrics dict (at the current schema version) as `read_as`."""
        return self.read(metrics) if self.read is not None else read_fields(self.metrics, metrics)
