"""Parsing of user-facing quantities (sizes in bytes, comma lists) with field-naming errors."""

from __future__ import annotations

import re

from accelbench.config.errors import ConfigError

_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(field: str, text: str) -> int:
    """'24GiB', '512MB', '1e9' -> bytes."""
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _BYTE_UNITS:
        raise ConfigError(field, f"cannot read size {text!r}", "a number with B, MB, GB, MiB, GiB")
    try:
        value = float(match.group(1)) * _BYTE_UNITS[unit]
    except ValueError:
        raise ConfigError(field, f"cannot read size {text!r}",
                          "a number with B, MB, GB, MiB, GiB") from None
    if not value >= 1:  # also NaN; 0.5B would round to 0, which reads as "no limit"
        raise ConfigError(field, f"must be at least one byte, got {text!r}", ">= 1B")
    return int(value)


def parse_int_list(field: str, text: str) -> tuple[int, ...]:
    """'8,16,32' -> (8, 16, 32); each must be a positive integer."""
    values = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        try:
            value = int(item)
        except ValueError:
            raise ConfigError(field, f"{item!r} is not an integer", "positive integers") from None
        if value <= 0:
            raise ConfigError(field, f"must be positive, got {value}", "positive integers")
        values.append(value)
    if not values:
        raise ConfigError(field, "needs at least one value", "a comma-separated list")
    return tuple(values)


def parse_choice_list(field: str, text: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """'fp32,bf16' -> ('fp32', 'bf16'), each checked against allowed."""
    values = tuple(filter(None, (s.strip().lower() for s in text.split(","))))
    if not values:
        raise ConfigError(field, "needs at least one value", ", ".join(allowed))
    for value in values:
        if value not in allowed:
            raise ConfigError(field, f"unknown value {value!r}", ", ".join(allowed))
    return values
