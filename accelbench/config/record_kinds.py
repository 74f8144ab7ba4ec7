"""The kind table: every record kind and how its metrics are written and read, assembled in this
one place from the schema modules of accelbench/config/records/ (each declares `KINDS`).

The table is a function of the modules found on that package's `__path__`, nothing else: no
workload is imported to build it and nothing adds to it at run time, so a record of any declared
kind reads back whatever was imported before. A kind not in it declares no metrics, and asking
for its names is an error, never another kind's names.

Records are written from the metrics classes (`metrics_dict`), so a metric name exists once, in
its schema module; tables, exports, the report and the planner's comparison read the same names.
Version 2 renamed the version-1 keys (store/migrate.py upgrades version-1 records on read).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from functools import cache
from types import MappingProxyType
from typing import Any

from accelbench.config import records
from accelbench.config.records.base import RecordKind, read_fields
from accelbench.config.records.fields import RecordSpec

SCHEMA_VERSION = 2


@cache
def _discover(paths: tuple[str, ...]) -> Mapping[str, RecordKind]:
    """Every kind declared by the schema modules on `paths`, by kind name; ValueError for a
    kind two modules declare."""
    table: dict[str, RecordKind] = {}
    where: dict[str, str] = {}
    for found in sorted(pkgutil.iter_modules(list(paths)), key=lambda m: m.name):
        module = importlib.import_module(f"{records.__name__}.{found.name}")
        for kind, declared in getattr(module, "KINDS", {}).items():
            if kind in table:
                raise ValueError(f"record kind {kind!r} is declared twice: in {where[kind]} "
                                 f"and {module.__name__}")
            table[kind], where[kind] = declared, module.__name__
    return MappingProxyType(dict(sorted(table.items())))


def record_kinds() -> Mapping[str, RecordKind]:
    """The kind table: every kind the schema modules declare, sorted by name."""
    return _discover(tuple(records.__path__))


def carries(kind: str, group: type) -> bool:
    """Whether a kind's metrics class is, or is composed of, `group`: a field group
    (PeakFields, TrialFields, ...) or a kind's whole metrics class (PeakMetrics: a measured
    peak's records), what a reader of that class may ask of its records; False for a kind not
    declared. What differs by kind is found this way or by its declaration's facts, never by
    testing its name."""
    declared = record_kinds().get(kind)
    return declared is not None and issubclass(declared.metrics, group)


def record_kind(kind: str) -> RecordKind:
    """One kind's declaration; ValueError for a kind that declares no metrics."""
    table = record_kinds()
    if kind not in table:
        raise ValueError(f"record kind {kind!r} declares no metrics (declared kinds: "
                         f"{', '.join(table)})")
    return table[kind]


class _MetricsByKind(Mapping[str, type]):
    """The kind table as kind -> the metrics class its records are written from (read only)."""

    def __getitem__(self, kind: str) -> type:
        return record_kinds()[kind].metrics

    def __iter__(self) -> Iterator[str]:
        return iter(record_kinds())

    def __len__(self) -> int:
        return len(record_kinds())


METRICS_BY_KIND: Mapping[str, type] = _MetricsByKind()


def metrics_class(kind: str) -> type:
    """The class a record of this kind reads as (block: BlockReading, its phases gathered);
    ValueError for a kind that declares no metrics."""
    return record_kind(kind).read_as


def read_metrics(kind: str, metrics: dict[str, Any]) -> Any:
    """A record's metrics dict (already at the current schema version) as its kind's frozen
    class: every declared name as an attribute, None where the dict lacks it. Keys the kind
    does not declare are not in the result: `undeclared_metrics` gives them."""
    return record_kind(kind).read_metrics(metrics)


def read_spec(kind: str, spec: dict[str, Any]) -> Any:
    """A record's spec dict as its kind's frozen spec class (RecordSpec's fields for a kind no
    schema module declares: another tool's): every declared field an attribute, None where the
    dict lacks it; keys the class does not declare stay in the dict."""
    declared = record_kinds().get(kind)
    return read_fields(declared.spec if declared is not None else RecordSpec, spec)


def undeclared_metrics(kind: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """The keys of a record's metrics its kind does not declare (another tool's, or a key a
    migration kept), with their values: kept reachable, never dropped."""
    declared = set(metric_names(kind))
    return {key: value for key, value in metrics.items() if key not in declared}


def metrics_dict(metrics: Any) -> dict[str, Any]:
    """A metrics dataclass as the record's dict (every declared key, None where unmeasured)."""
    return asdict(metrics)


def partial_metrics_dict(cls: type, **values: Any) -> dict[str, Any]:
    """Only `values`, under their record keys, checked against a metrics class's fields."""
    made = cls(**values)
    return {name: getattr(made, name) for name in values}


def metric_names(kind: str) -> tuple[str, ...]:
    """Every metric key a record of this kind declares; ValueError for an undeclared kind."""
    return record_kind(kind).names
