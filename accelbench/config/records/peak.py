"""The measured GEMM peak's record kind ('peak')."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.config.records.base import RecordKind
from accelbench.config.records.fields import RecordSpec


@dataclass(frozen=True)
class PeakMetrics:
    """A measured GEMM peak, stored as its own record and used by every cell of a sweep."""

    peak_flops_per_s_per_device: float | None = None  # the best repetition: a peak
    peak_flops_per_s_median: float | None = None
    peak_flops_per_s_min: float | None = None
    repetitions: int | None = None
    gemm_n: int | None = None
    gemm_layout: str | None = None
    threads: int | None = None
    # Other work used the machine while it was measured (hardware/disturbance.py), on every
    # attempt: measured again after a pause up to PEAK_ATTEMPTS times (bench/gemm_peak.py), never
    # reused by a later sweep; the report says which MFUs rest on it.
    disturbed: bool | None = None
    attempts: int | None = None  # measurements made to reach this one (1: undisturbed at once)


@dataclass(frozen=True)
class PeakRecordSpec(RecordSpec):
    """What a peak was measured for: a sweep's precision on a device
    (bench/recording/peaks.py peak_identity)."""

    precision: str | None = None
    threads: int | None = None


KINDS = {"peak": RecordKind(PeakMetrics, spec=PeakRecordSpec, machine_context=True)}
