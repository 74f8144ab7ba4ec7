"""Records as flat tables (CSV, JSON rows, Parquet) and as whole records (JSON), for people and
other tools.

A flat table has one row per record and the same columns in every row: `HEAD_COLUMNS`, then
`spec.*` (sorted), `metrics.*` in the order config/records/ declares them (`metric_names`,
kinds in `KIND_ORDER`; names no schema declares after them, sorted), then `env.*` (sorted); the
union over the records, a value a record lacks empty (None). A list or dict value (a per-rank
list, the model's configuration) is one cell of compact JSON text; raw times are only in the
whole-record JSON.

Every text format is standard: JSON is strict (a non-finite float is written as
`{"__float__": "nan"}`, store/jsontext.py), and so is every list or dict cell of the CSV; a
non-finite scalar in a CSV cell is written `nan`, `inf` or `-inf`. Parquet (pyarrow, the
optional `parquet` extra, imported only when writing it) types each column from its values:
int64, float64 (a real NaN), bool, string (lists and dicts as their JSON text), or null when the
column is empty.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from accelbench.config.errors import ConfigError
from accelbench.config.record_kinds import METRICS_BY_KIND, metric_names
from accelbench.store.jsontext import dumps
from accelbench.store.record import Record

HEAD_COLUMNS = ("id", "run_id", "kind", "status", "reason", "created_utc", "uid")
KIND_ORDER = ("block", "train", "peak")  # whose declared metrics come first, in this order
OUTPUT_ALLOWED = "a file path in an existing folder"


def to_json(records: list[Record]) -> str:
    """A JSON array of whole records (raw times included): what `results import` reads."""
    return dumps([asdict(r) for r in records], indent=2)


def _metric_order(kinds: Sequence[str]) -> list[str]:
    """Declared metric names, the kinds of KIND_ORDER first, then the other kinds seen."""
    ordered = [k for k in KIND_ORDER if k in kinds] + sorted(set(kinds) - set(KIND_ORDER))
    names: dict[str, None] = {}
    for kind in ordered:
        if kind in METRICS_BY_KIND:  # another tool's kind: its keys follow, sorted
            names.update(dict.fromkeys(metric_names(kind)))
    return list(names)


def flat_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The columns of flat rows (Record.flat): their union, in the module's stable order."""
    present = dict.fromkeys(key for row in rows for key in row)
    head = [c for c in HEAD_COLUMNS if c in present]
    spec = sorted(c for c in present if c.startswith("spec."))
    declared = [f"metrics.{name}" for name in _metric_order([r.get("kind") for r in rows])]
    metrics = [c for c in declared if c in present]
    metrics += sorted(c for c in present if c.startswith("metrics.") and c not in metrics)
    env = sorted(c for c in present if c.startswith("env."))
    done = set(head + spec + metrics + env)
    return head + spec + metrics + env + sorted(c for c in present if c not in done)


def flat_table(records: Sequence[Record]) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows): one row per record, every row with every column (None where a record
    has no value)."""
    flat = [r.flat() for r in records]
    columns = flat_columns(flat)
    return columns, [{c: row.get(c) for c in columns} for row in flat]


def to_csv(records: list[Record]) -> str:
    """The flat table as CSV: a header, then one row per record (None as an empty cell)."""
    columns, rows = flat_table(records)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def to_flat_json(records: list[Record]) -> str:
    """The flat table as a JSON array of objects, each with every column in order (null where a
    record has no value)."""
    _, rows = flat_table(records)
    return dumps(rows, indent=2)


def _arrow_type(values: list[Any], pa: Any) -> Any:
    """The Parquet type of a column from its non-null values."""
    if not values:
        return pa.null()
    kinds = {type(v) for v in values}
    if kinds == {bool}:
        return pa.bool_()
    if kinds == {int} and all(-2**63 <= v < 2**63 for v in values):
        return pa.int64()
    if kinds <= {int, float}:
        return pa.float64()
    return pa.string()


def _arrow_value(value: Any, kind: Any, pa: Any) -> Any:
    if value is None:
        return None
    if kind == pa.float64():
        return float(value)
    if kind == pa.string() and not isinstance(value, str):
        return dumps(value)  # a number or bool in a column of text: its JSON text
    return value


def to_parquet(records: list[Record]) -> bytes:
    """The flat table as a Parquet file (pyarrow: the optional 'parquet' extra)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as err:
        raise ConfigError("format", "parquet needs pyarrow, the 'parquet' extra: pip install "
                          "'accelbench[parquet]'", "csv, json, flat-json; parquet with the "
                          "'parquet' extra") from err
    columns, rows = flat_table(records)
    arrays = []
    for column in columns:
        values = [row[column] for row in rows]
        kind = _arrow_type([v for v in values if v is not None], pa)
        arrays.append(pa.array([_arrow_value(v, kind, pa) for v in values], type=kind))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_arrays(arrays, names=columns), sink)
    return sink.getvalue().to_pybytes()


def check_output(path: Path, field: str = "output") -> Path:
    """Refuse, before anything runs, an output path that is a folder or in a missing folder."""
    if str(path).strip() in ("", "."):
        raise ConfigError(field, "empty path", OUTPUT_ALLOWED)
    if path.is_dir():
        raise ConfigError(field, f"'{path}' is a directory", OUTPUT_ALLOWED)
    if not path.parent.is_dir():
        raise ConfigError(field, f"'{path}': folder '{path.parent}' does not exist",
                          OUTPUT_ALLOWED)
    return path


def write_text(path: Path, text: str | bytes, field: str = "output") -> None:
    """Write an export (text, or bytes for Parquet); a path that cannot be written is one line
    naming the field."""
    check_output(path, field)
    try:
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
    except OSError as err:
        raise ConfigError(field, f"'{path}' cannot be written ({err.strerror or err})",
                          OUTPUT_ALLOWED) from err
