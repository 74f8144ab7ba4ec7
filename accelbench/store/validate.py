"""Records from elsewhere are untrusted: each is checked whole before anything is written.

A file `results import` reads, a database `results merge` copies and a bundle the site or an
import reads may come from anyone. `parse_json` refuses text nested deeper than `MAX_DEPTH`
before Python's parser sees it (its recursion would end in a traceback), and `check_record`
holds a decoded record against its kind's schema (config/records/): the top-level fields'
types, the status and kind among those declared, a schema version this build reads, every
declared metric's type (a number where a number is declared, a list of numbers where a list
is), the spec and environment fields the readers use, the raw fields they read, and sizes
(characters of a string, items of a list or object, depth, the record's whole text). A problem
is a `RecordProblem` naming the field and what is allowed, one line; callers turn it into a
ConfigError (exit 2) before writing, or skip an old row with a warning naming it.
"""

from __future__ import annotations

import re
import sys
import typing
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from functools import cache
from itertools import accumulate
from types import NoneType, UnionType
from typing import Any

from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.record_kinds import METRICS_BY_KIND, SCHEMA_VERSION
from accelbench.config.records.block import BLOCK_PHASES, BlockMetrics, PhaseFields
from accelbench.config.records.fields import RecordSpec
from accelbench.store.jsontext import loads
from accelbench.store.migrate import upgrade
from accelbench.store.record import STATUSES

MAX_DEPTH = 32  # nesting of objects and arrays in one record (the deepest written today: 9)
MAX_TEXT_CHARS = 1_000_000  # one string (a reason, a key): a traceback fits, a payload not
MAX_ITEMS = 2_000_000  # entries of one list or object (a long run's per-step times fit)
MAX_RECORD_CHARS = 64 * 2**20  # one record's JSON text
_HEX = re.compile(r"[0-9a-f]{1,64}")
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")

# The top-level fields of a record and their types.
TOP: dict[str, Any] = {"kind": str, "status": str, "spec": dict[str, Any],
                       "environment": dict[str, Any], "metrics": dict[str, Any],
                       "raw": dict[str, Any], "reason": str, "run_id": str,
                       "created_utc": str, "schema_version": int, "uid": str}
REQUIRED = ("kind", "status", "spec", "environment")
# The spec fields readers of every kind (tables, report, site) use, checked where present, each
# with the type RecordSpec (config/records/fields.py) declares it with: a benchmark, where
# present, is a string (null refused). The other fields of a kind's spec class are not
# checked here: refusing them would refuse records this build has always accepted.
SPEC_CHECKED = ("benchmark", "model_name", "model", "layout", "seq_len", "batch", "micro_batch",
                "gas", "dtype", "recompute", "sparsity", "sparsity_pattern", "sparsity_mask",
                "token_unit", "fp8_recipe", "study", "trials", "steps", "repeats", "nproc",
                "world_size", "compile", "tf32", "data")
_SPEC_TYPES = typing.get_type_hints(RecordSpec)
SPEC: dict[str, Any] = {**{name: _SPEC_TYPES[name] for name in SPEC_CHECKED}, "benchmark": str}
# Values of a model or layout: scalars only (ModelConfig and Layout take no nested values).
SCALAR = str | int | float | bool | None
# The environment fields readers use (machine names, fingerprints, fairness), as types.
ENVIRONMENT: dict[str, Any] = {
    "device_type": str | None, "device_name": str | None, "device_count": int | None,
    "device_capability": list[int] | str | None, "driver_version": str | None,
    "cuda_runtime": str | None, "hip_runtime": str | None, "torch": str | None,
    "python": str | None, "cpu": str | None, "cpu_count": int | None,
    "torch_threads": int | None, "host": str | None, "accelbench": str | None,
    "git_revision": str | None, "os": str | None, "device_spec_key": str | None,
}
# raw fields the readers open: each trial's values, the disturbance probe's GPU edges.
RAW: dict[str, Any] = {"trial_values": dict[str, list[float | None] | None],
                       "disturbance": dict[str, Any], "rank0": dict[str, Any]}


class RecordProblem(ValueError):
    """One thing wrong with a record, as one line: the field and what is allowed."""


def _depth(text: str) -> int:
    """How deep objects and arrays nest in JSON text (strings skipped), without parsing it."""
    steps = (1 if b in "[{" else -1 for b in _BRACKETS.findall(_STRINGS.sub("", text)))
    return max(accumulate(steps, initial=0))


def parse_json(text: str, max_depth: int = MAX_DEPTH, max_text: int = MAX_TEXT_CHARS) -> Any:
    """Decode JSON (tagged non-finite floats restored: jsontext) that nests at most `max_depth`;
    RecordProblem, one line, for deeper text or text that is not JSON."""
    depth = _depth(text)
    if depth > max_depth:
        raise RecordProblem(f"nested {depth} deep; allowed: at most {max_depth}")
    longest = max(map(len, _STRINGS.findall(text)), default=2) - 2
    if longest > max_text:
        raise RecordProblem(f"holds a string of {longest:,} characters; allowed: at most "
                            f"{max_text:,}")
    try:
        return loads(text)
    except RecursionError as err:  # a belt: the depth check above comes first
        raise RecordProblem(f"nested too deep; allowed: at most {max_depth}") from err
    except ValueError as err:  # JSONDecodeError, or an integer of too many digits
        raise RecordProblem(f"not JSON ({_first_line(err)})") from err


def _first_line(err: Exception) -> str:
    text = str(getattr(err, "msg", "") or err)
    return text.splitlines()[0][:200] if text else type(err).__name__


def _type_name(hint: Any) -> str:
    """'number or null', 'list of number or null', ...: what a field allows, in words."""
    if hint is Any:
        return "any JSON value"
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, UnionType):
        return " or ".join(dict.fromkeys(_type_name(a) for a in args))
    if origin is list:
        return f"list of ({_type_name(args[0])})"
    if origin is dict:
        return f"object of ({_type_name(args[1])})"
    if is_dataclass(hint):
        return f"object ({hint.__name__})"
    return {NoneType: "null", float: "number", int: "integer", str: "string",
            bool: "true/false"}.get(hint, getattr(hint, "__name__", str(hint)))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:  # an older record's count may be a float of an integer
    return (isinstance(value, int) and not isinstance(value, bool)
            or isinstance(value, float) and value.is_integer())


@cache
def _checker(hint: Any) -> Callable[[Any], bool]:
    """A test for one declared type, made once per type (int is a number; bool is no number)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return lambda value: True
    if origin in (typing.Union, UnionType):
        parts = tuple(_checker(a) for a in args if a is not NoneType)
        if len(parts) == 1:  # the common 'X | None'
            return lambda value: value is None or parts[0](value)
        return lambda value: any(part(value) for part in parts) or (
            value is None and NoneType in args)
    if origin is list:
        item = _checker(args[0])
        return lambda value: isinstance(value, list) and all(map(item, value))
    if origin is dict:
        item = _checker(args[1])
        return lambda value: isinstance(value, dict) and all(map(item, value.values()))
    if is_dataclass(hint):
        return lambda value: isinstance(value, dict) and not _dataclass_problem(value, hint, "")
    return {float: _is_number, int: _is_int}.get(hint, lambda value: isinstance(value, hint))


def matches(value: Any, hint: Any) -> bool:
    """Whether a decoded JSON value has the declared type."""
    return _checker(hint)(value)


def _check(name: str, value: Any, hint: Any) -> None:
    if not matches(value, hint):
        raise RecordProblem(f"{name} is {_json_type(value)}; allowed: {_type_name(hint)}")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    return {NoneType: "null", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _dataclass_problem(value: dict[str, Any], cls: type, where: str) -> str | None:
    hints = _hints(cls)
    for f in fields(cls):
        if f.name in value and not matches(value[f.name], hints[f.name]):
            return (f"{where}{f.name} is {_json_type(value[f.name])}; allowed: "
                    f"{_type_name(hints[f.name])}")
    return None


@cache
def metric_types(kind: str) -> dict[str, Any]:
    """Every declared metric of a kind and its type (a block's phase fields by their keys)."""
    cls = METRICS_BY_KIND[kind]
    hints = typing.get_type_hints(cls)
    types = {f.name: hints[f.name] for f in fields(cls)}
    if cls is BlockMetrics:
        phase = typing.get_type_hints(PhaseFields)
        types |= {f"{p}_{f.name}": phase[f.name] for p in BLOCK_PHASES for f in fields(PhaseFields)}
    return {name: _as_written(hint) for name, hint in types.items()}


def _as_written(hint: Any) -> Any:
    """A field declared as read or as written (`list[dict] | list[ScaleRow]`: written as dicts,
    read back as the class) is checked as the class's fields, each typed."""
    args = typing.get_args(hint)
    rows = [a for a in args if typing.get_origin(a) is list and is_dataclass(
        typing.get_args(a)[0])]
    if not rows:
        return hint
    return rows[0] | None if NoneType in args else rows[0]


def _sizes(data: Any) -> None:
    """Depth, string length and item counts of a decoded value, walked without recursion."""
    stack = [(data, 0, "record")]
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise RecordProblem(f"{where} nests deeper than {MAX_DEPTH}")
        if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
            raise RecordProblem(f"{where} is a string of {len(value):,} characters; allowed: "
                                f"at most {MAX_TEXT_CHARS:,}")
        if isinstance(value, list | dict):
            if len(value) > MAX_ITEMS:
                raise RecordProblem(f"{where} has {len(value):,} items; allowed: at most "
                                    f"{MAX_ITEMS:,}")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and len(key) > MAX_TEXT_CHARS:
                    raise RecordProblem(f"{where} has a key of {len(key):,} characters")
                stack.append((item, depth + 1, f"{where}.{key}" if depth < 3 else where))


def _check_top(data: dict[str, Any]) -> None:
    for name in REQUIRED:
        if name not in data:
            raise RecordProblem(f"{name} is missing; allowed: a record as accelbench writes it")
    unknown = sorted(set(data) - set(TOP) - {"id"})
    if unknown:
        raise RecordProblem(f"unknown field {unknown[0][:60]!r}; allowed: {', '.join(TOP)}")
    for name, hint in TOP.items():
        if name in data:
            _check(name, data[name], hint)
    version = data.get("schema_version", 1)
    if not 1 <= version <= SCHEMA_VERSION:
        newer = " (written by a newer accelbench: upgrade to read it)" if version > 1 else ""
        raise RecordProblem(f"schema_version is {version}{newer}; allowed: 1 to "
                            f"{SCHEMA_VERSION}")
    if data["status"] not in STATUSES:
        raise RecordProblem(f"status is {data['status'][:40]!r}; allowed: {', '.join(STATUSES)}")
    if data["kind"] not in METRICS_BY_KIND:
        raise RecordProblem(f"kind is {data['kind'][:40]!r}; allowed: "
                            f"{', '.join(METRICS_BY_KIND)}")


def _check_fields(part: str, values: dict[str, Any], types: dict[str, Any]) -> None:
    for name, hint in types.items():
        if name in values:
            _check(f"{part}.{name}", values[name], hint)


def _check_spec(spec: dict[str, Any]) -> None:
    _check_fields("spec", spec, SPEC)
    for part, cls in (("model", ModelConfig), ("layout", Layout)):
        hints = _hints(cls)  # the declared fields' types; any other key a scalar
        for key, value in (spec.get(part) or {}).items():
            _check(f"spec.{part}.{key[:60]}", value, hints.get(key, SCALAR) | None)
    for key in ("fingerprint", "workload_id"):
        value = spec.get(key)
        if value is not None and not (isinstance(value, str) and _HEX.fullmatch(value)):
            raise RecordProblem(f"spec.{key} is not a hash; allowed: lowercase hex digits")
    study = spec.get("study") or {}
    _check_fields("spec.study", study, {"name": str | None, "experiment": str | None,
                                        "profile": str | None})


def _check_raw(raw: dict[str, Any]) -> None:
    _check_fields("raw", raw, RAW)
    for edge_of in (raw.get("disturbance"), (raw.get("rank0") or {}).get("disturbance")):
        gpu = (edge_of or {}).get("gpu")
        _check("raw.disturbance.gpu", gpu, dict[str, dict[str, Any]] | None)
        for edge, values in (gpu or {}).items():
            _check_fields(f"raw.disturbance.gpu.{edge[:20]}", values,
                          {"sm_clock_mhz": float | None, "clock_reasons": list[str] | None})


def _check_metrics(kind: str, metrics: dict[str, Any]) -> None:
    types = metric_types(kind)
    for name, hint in types.items():
        if name in metrics:
            _check(f"metrics.{name}", metrics[name], hint)


def _upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """The record at the current schema (store/migrate.py), as the readers will see it."""
    try:
        return upgrade(data)
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as err:
        raise RecordProblem(f"a version-{data.get('schema_version', 1)} record that cannot be "
                            f"upgraded ({type(err).__name__}: {_first_line(err)})") from err


def check_record(data: Any, sized: bool = False) -> None:
    """Raise RecordProblem (one line naming the field) unless `data` is a record this build
    reads without error: types, status, kind, schema version, metrics, spec, raw, sizes
    (`sized`: its text was measured already, by parse_json)."""
    if not isinstance(data, dict):
        raise RecordProblem(f"is {_json_type(data)}; allowed: a JSON object (a record)")
    if not sized:
        _sizes(data)
    _check_top(data)
    _check_fields("environment", data["environment"], ENVIRONMENT)
    _check_spec(data["spec"])
    _check_raw(data.get("raw") or {})
    _check_metrics(data["kind"], _upgraded(data).get("metrics") or {})
    uid = data.get("uid") or ""
    if uid and not _HEX.fullmatch(uid):
        raise RecordProblem("uid is not a hash; allowed: lowercase hex digits")


def record_from_text(text: str) -> dict[str, Any]:
    """A record's JSON text decoded and checked (RecordProblem on any problem)."""
    if len(text) > MAX_RECORD_CHARS:
        raise RecordProblem(f"is {len(text):,} characters of JSON; allowed: at most "
                            f"{MAX_RECORD_CHARS:,}")
    data = parse_json(text)
    check_record(data, sized=True)
    return data


def check_stored_row(row: tuple) -> None:
    """A database row (run_id, kind, status, created_utc, schema_version, record_json, uid)
    whose record is sound and whose columns say what its record says (a merge copies both)."""
    run_id, kind, status, created, version, text, uid = row
    if not isinstance(text, str):
        raise RecordProblem(f"record_json is {_json_type(text)}; allowed: JSON text")
    data = record_from_text(text)
    columns = {"run_id": run_id, "kind": kind, "status": status, "created_utc": created,
               "schema_version": version}
    for name, value in columns.items():
        if value != data.get(name, 1 if name == "schema_version" else None):
            raise RecordProblem(f"its {name} column differs from its record's; allowed: "
                                "the row as accelbench writes it")
    if uid is not None and not (isinstance(uid, str) and (uid == "" or _HEX.fullmatch(uid))):
        raise RecordProblem("its uid column is not a hash; allowed: lowercase hex digits")


_WARNED: set[tuple[str, int]] = set()


def warn_skipped(path: Any, record_id: int, problem: str) -> None:
    """One line on stderr, once a process, naming a stored record a reader skips and why."""
    if (str(path), record_id) in _WARNED:
        return
    _WARNED.add((str(path), record_id))
    print(f"warning: '{path}' record {record_id} skipped: {problem}", file=sys.stderr)


__all__ = ["MAX_DEPTH", "RecordProblem", "check_record", "check_stored_row", "matches",
           "parse_json", "record_from_text", "warn_skipped"]
