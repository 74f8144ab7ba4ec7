"""What a measured cell hands to the results layer (which adds environment, ids and time)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """One cell's status, spec, metrics and raw per-repetition times."""

    kind: str
    status: str  # ok, oom, unsupported, error, diverged, timeout
    spec: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


Sink = Callable[[Outcome], Any]
Progress = Callable[[int, int, str], None]  # (done, total, label of the cell starting now)
