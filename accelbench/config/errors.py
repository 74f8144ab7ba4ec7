"""The one error type for bad input: names the field and what is allowed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any


class ConfigError(ValueError):
    """Bad user input, raised before anything runs; the CLI prints it on one line, exit 2."""

    def __init__(self, field: str, problem: str, allowed: str | None = None) -> None:
        self.field = field
        self.problem = problem
        self.allowed = allowed
        text = f"{field}: {problem}"
        if allowed:
            text += f" (allowed: {allowed})"
        super().__init__(text)


def require_positive(field: str, value: int | float) -> None:
    """Reject zero, negative and non-finite (NaN, infinite) sizes, naming the field."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ConfigError(field, f"must be a positive number, got {value!r}", "> 0")
    if not math.isfinite(value):
        raise ConfigError(field, f"must be a finite number, got {value!r}", "a finite number > 0")
    if value <= 0:
        raise ConfigError(field, f"must be a positive number, got {value!r}", "> 0")


def require_count(field: str, value: object, maximum: int, minimum: int = 1) -> int:
    """A whole count within its stated bounds (config/units.py COUNT_BOUNDS says why each
    bound is where it is): a count past it would run for days or not fit, refused first."""
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise ConfigError(field, f"must be a whole number from {minimum:,} to {maximum:,}, got "
                          f"{value!r}", f"{minimum:,} to {maximum:,}")
    return value


def require_finite(field: str, value: float) -> None:
    """NaN and infinity are not numbers a run or a plan can use."""
    if not math.isfinite(value):
        raise ConfigError(field, f"must be a finite number, got {value!r}", "a finite number")


def require_choice(field: str, value: str, allowed: list[str] | tuple[str, ...]) -> str:
    """Return value if it is one of allowed, else raise naming the allowed values."""
    if value not in allowed:
        raise ConfigError(field, f"unknown value {value!r}", ", ".join(allowed))
    return value


def checked_fields(cls: type, values: Mapping[str, Any], required: Sequence[str],
                   field: str, keep_none: bool = True) -> Any:
    """A dataclass from a hand-written mapping: `required` keys present (ConfigError naming
    `field` otherwise), keys it does not declare ignored, None values left to the defaults
    unless `keep_none`."""
    missing = [k for k in required if k not in values]
    if missing:
        raise ConfigError(field, f"missing keys {missing}", ", ".join(required))
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in values.items()
                  if k in known and (keep_none or v is not None)})
