"""The block micro-benchmark's record kind ('block'): a cell's fields and each timed phase's,
keyed '<phase>_<field>' in a record and gathered back into PhaseFields when read."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from accelbench.config.records.base import ComparedFigure, RecordKind, read_fields
from accelbench.config.records.fields import (
    EnergyFields,
    MemoryFields,
    PeakFields,
    RecordSpec,
    TrialFields,
)

BLOCK_PHASES = ("forward", "backward", "forward_backward")


@dataclass(frozen=True)
class PhaseFields:
    """One timed phase of the block benchmark; record keys are '<phase>_<field>'."""

    time_s_median: float | None = None
    time_s_min: float | None = None
    time_s_max: float | None = None
    time_s_iqr: float | None = None
    samples: int | None = None
    few_samples: bool | None = None
    flops: float | None = None
    tflops_per_device: float | None = None
    tokens_per_s_per_device: float | None = None
    mfu: float | None = None


@dataclass(frozen=True)
class BlockMetrics(EnergyFields, MemoryFields, PeakFields, TrialFields):
    """A block micro-benchmark cell (one device); its phases are added by `phase_dict`."""

    tokens_per_step_global: int | None = None


@dataclass(frozen=True)
class BlockReading(BlockMetrics):
    """A block record's metrics as read: the cell's fields, and each phase's '<phase>_<field>'
    keys gathered back into its PhaseFields (`reading.forward_backward.mfu`)."""

    forward: PhaseFields = PhaseFields()
    backward: PhaseFields = PhaseFields()
    forward_backward: PhaseFields = PhaseFields()

    def phase(self, name: str) -> PhaseFields:
        """One phase's fields by its name (one of BLOCK_PHASES)."""
        if name not in BLOCK_PHASES:
            raise ValueError(f"phase must be one of {BLOCK_PHASES}, got {name!r}")
        return getattr(self, name)


    @classmethod
    def read(cls, metrics: dict[str, Any]) -> BlockReading:
        """A block record's metrics dict, each phase's keys gathered into its PhaseFields."""
        phases = {p: PhaseFields(**{f.name: metrics.get(f"{p}_{f.name}")
                                    for f in fields(PhaseFields)}) for p in BLOCK_PHASES}
        return cls(**vars(read_fields(BlockMetrics, metrics)), **phases)


class PhaseTimed(StrEnum):
    """A block phase's median time, then the rates computed from it (PhaseFields fields, keyed
    '<phase>_<name>' in a record): the figures a block cell measured as trials gives an
    interval, in that order (workloads/block/runner.py)."""

    TIME_S_MEDIAN = "time_s_median"
    TFLOPS_PER_DEVICE = "tflops_per_device"
    TOKENS_PER_S_PER_DEVICE = "tokens_per_s_per_device"
    MFU = "mfu"


def phase_dict(phase: str, values: PhaseFields) -> dict[str, Any]:
    """A block phase's fields under their record keys."""
    if phase not in BLOCK_PHASES:
        raise ValueError(f"phase must be one of {BLOCK_PHASES}, got {phase!r}")
    return {f"{phase}_{k}": v for k, v in asdict(values).items()}


@dataclass(frozen=True)
class BlockRecordSpec(RecordSpec):
    """A block cell's spec as stored (workloads/block/runner.py's BlockSpec, one batch)."""

    warmup: int | None = None


def block_figure(m: BlockReading, s: RecordSpec) -> ComparedFigure:
    """What a block cell is compared on: its tokens over its forward and backward's time, on
    one device."""
    p = m.forward_backward
    return ComparedFigure(m.tokens_per_step_global, p.time_s_median, p.time_s_min, p.time_s_max,
                          p.time_s_iqr, m.interval(f"forward_backward_{PhaseTimed.TIME_S_MEDIAN}"),
                          1, s.token_unit or "token", p.mfu, p.tflops_per_device)


KINDS = {"block": RecordKind(
    BlockMetrics, reading=BlockReading, read=BlockReading.read, spec=BlockRecordSpec, cell=True,
    compared=block_figure,
    extra_names=tuple(f"{p}_{f.name}" for p in BLOCK_PHASES for f in fields(PhaseFields)))}
