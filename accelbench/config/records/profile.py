"""The machine profile's record kind ('profile', `accelbench calibrate`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.config.records.base import RecordKind
from accelbench.config.records.fields import RecordSpec


@dataclass(frozen=True)
class ProfileMetrics:
    """A machine profile (`accelbench calibrate`): every timed point and what the curves of
    analytics/machine_profile.py are read against."""

    points: list[dict[str, Any]] | None = None  # analytics.profile.point_dict, one a call shape
    peak_flops_per_s_by_dtype: dict[str, float] | None = None  # what efficiency 1.0 stands for
    peak_label_by_dtype: dict[str, str] | None = None  # datasheet dense, or measured
    gemm_flops_per_s_max_by_dtype: dict[str, float] | None = None  # fastest GEMM point
    attention_flops_per_s_max_by_dtype: dict[str, float] | None = None  # fastest attention
    memory_bytes_per_s_max: float | None = None  # fastest streaming point
    collective_ranks: int | None = None  # processes the collectives ran on
    collective_backend: str | None = None  # gloo, nccl, ...
    collective_latency_s_by_op: dict[str, float] | None = None  # least median over sizes
    collective_bus_bytes_per_s_max_by_op: dict[str, float] | None = None  # best busbw
    collective_reason: str | None = None  # why collectives were not measured, when not
    threads: int | None = None  # CPU threads of the compute measurements


@dataclass(frozen=True)
class ProfileRecordSpec(RecordSpec):
    """What a calibration measured (workloads/calibrate/options.py's CalibrateSpec)."""

    quick: bool | None = None
    concurrent: bool | None = None
    threads: int | None = None
    warmup: int | None = None
    timeout_s: float | None = None
    dtypes: list[str] | None = None
    ops: list[str] | None = None
    tokens: list[int] | None = None
    seqs: list[int] | None = None
    head_dims: list[int] | None = None
    gemm_passes: list[str] | None = None
    memory_ops: list[str] | None = None
    memory_bytes: list[int] | None = None
    collectives: list[str] | None = None
    message_bytes: list[int] | None = None
    optimizer_params: list[int] | None = None


KINDS = {"profile": RecordKind(ProfileMetrics, spec=ProfileRecordSpec)}
