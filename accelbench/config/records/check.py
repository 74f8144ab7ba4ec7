"""The feature check's record kind ('check', `accelbench check`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.config.records.base import RecordKind
from accelbench.config.records.fields import RecordSpec


@dataclass(frozen=True)
class CheckMetrics:
    """`accelbench check`: the feature matrix of one device (bench/feature_check.py), one entry a
    feature: name, status (ok, unavailable, failed), detail (what was found or why not),
    seconds, values."""

    features: list[dict[str, Any]] | None = None
    features_ok: int | None = None
    features_unavailable: int | None = None
    features_failed: int | None = None
    check_time_s: float | None = None  # the whole matrix, wall clock


@dataclass(frozen=True)
class CheckRecordSpec(RecordSpec):
    """What the feature matrix probed, and with which sizes."""

    probes: list[str] | None = None
    matmul_n: int | None = None
    attention_shape: list[int] | None = None
    compile_backend: str | None = None


KINDS = {"check": RecordKind(CheckMetrics, spec=CheckRecordSpec)}
