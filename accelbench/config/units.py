"""Parsing of user-facing quantities (sizes in bytes, comma lists) with field-naming errors.

Names (precisions, recompute kinds, devices, presets, layout words, operations) are
case-sensitive and written in lower case: 'FP32' is refused with the allowed values, never read
as 'fp32'. The unit of a size or count ('24GiB', '512mb', '16M') is a unit, read in any case."""

from __future__ import annotations

import math
import re

from accelbench.config.errors import ConfigError

# The largest value of each count a user can give, and why there (docs/bad-input.md, "Bounds"):
# past these a cell would run for days, keep a record too large to read, or stack more token
# ids than any device holds; the memory estimate prices what fits below them.
MAX_STEPS = 100_000  # each step's time, loss, lr and data wait are kept in the record
MAX_GAS = 16_384  # a step's micro-batches are stacked: gas x micro-batch sequences of token ids
MAX_BATCH = 65_536  # sequences in one micro-batch (block: in one batch)
MAX_REPEATS = 100_000  # a block trial's timed repetitions, each kept in the record
MAX_DEVICES = 65_536  # one process a device: scale's counts
MAX_THREADS = 1024  # calibrate's CPU threads: more than any node has
MAX_GEMM_ROWS = 1_048_576  # calibrate's --tokens: GEMM rows (batch x sequence) of one product
COUNT_BOUNDS = {"steps": MAX_STEPS, "gas": MAX_GAS, "micro-batch": MAX_BATCH,
                "batch": MAX_BATCH, "repeats": MAX_REPEATS, "warmup": MAX_REPEATS,
                "devices": MAX_DEVICES, "threads": MAX_THREADS, "tokens": MAX_GEMM_ROWS}

_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE_ALLOWED = "a number with B, MB, GB, MiB, GiB"


def parse_bytes(field: str, text: str) -> int:
    """'24GiB', '512MB', '1e9' -> bytes."""
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _BYTE_UNITS:
        raise ConfigError(field, f"cannot read size {text!r}", _SIZE_ALLOWED)
    try:
        value = float(match.group(1)) * _BYTE_UNITS[unit]
    except ValueError:
        raise ConfigError(field, f"cannot read size {text!r}", _SIZE_ALLOWED) from None
    if not math.isfinite(value):  # '1e999' reads as infinity
        raise ConfigError(field, f"size {text!r} is not a finite number", _SIZE_ALLOWED)
    if not value >= 1:  # 0.5B would round to 0, which reads as "no limit"
        raise ConfigError(field, f"must be at least one byte, got {text!r}", ">= 1B")
    return int(value)


def _items(field: str, text: str, allowed: str) -> list[str]:
    """The comma-separated items of `text`, stripped; an empty item ('1,,2', '1,', ',') or
    an empty list is refused rather than silently dropped."""
    if not text.strip():
        raise ConfigError(field, "needs at least one value", allowed)
    items = [s.strip() for s in text.split(",")]
    if "" in items:
        raise ConfigError(field, f"empty item in {text!r}", allowed)
    return items


def _unique(field: str, values: list, allowed: str) -> tuple:
    """Refuse a value given twice: a sweep would measure the same cell twice."""
    seen: set = set()
    for value in values:
        if value in seen:
            raise ConfigError(field, f"{value} given twice", f"{allowed}; each at most once")
        seen.add(value)
    return tuple(values)


def parse_int_list(field: str, text: str) -> tuple[int, ...]:
    """'8,16,32' -> (8, 16, 32); each a positive integer (at most the field's COUNT_BOUNDS
    entry where it has one), given once, no empty item."""
    bound = COUNT_BOUNDS.get(field)
    allowed = "comma-separated positive integers" + (f" up to {bound:,}" if bound else "")
    values = []
    for item in _items(field, text, allowed):
        try:
            value = int(item)
        except ValueError:
            raise ConfigError(field, f"{item!r} is not an integer", allowed) from None
        if value <= 0:
            raise ConfigError(field, f"must be positive, got {value}", allowed)
        if bound and value > bound:
            raise ConfigError(field, f"{value:,} is over the bound of {bound:,}", allowed)
        values.append(value)
    return _unique(field, values, allowed)


def parse_choice_list(field: str, text: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """'fp32,bf16' -> ('fp32', 'bf16'), each one of `allowed` as written there (names are
    case-sensitive: 'FP32' is refused, naming the allowed values), given once, no empty item."""
    names = ", ".join(allowed)
    values = _items(field, text, names)
    for value in values:
        if value not in allowed:
            raise ConfigError(field, f"unknown value {value!r}", names)
    return _unique(field, values, names)
