"""The scaling study's record kind ('scale'): its table, one row a device count, beside its
per-count training cells (kind 'train')."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from accelbench.config.records.base import RecordKind
from accelbench.config.records.fields import RecordSpec


@dataclass(frozen=True)
class ScaleRow:
    """One device count of a scaling study's table (bench.scale.scaling_rows); the measured
    fields are None, and absent from the stored row, where the count did not run or none did."""

    devices: int | None = None
    status: str | None = None
    reason: str | None = None
    baseline_devices: int | None = None  # the count the speedups are over
    global_batch: int | None = None
    tokens_per_s_global: float | None = None
    tokens_per_s_per_device: float | None = None
    speedup: float | None = None
    scaling_efficiency: float | None = None
    mfu: float | None = None
    # From trials (bench.scale.speedup_evidence: analytics.stats.compare of this count's
    # per-trial tokens/s against the baseline count's); stored only where they have a value,
    # so a one-trial study's rows are as before trials.
    trials: int | None = None  # this count's trials
    speedup_low: float | None = None  # 95% interval of the speedup (None: too few trials)
    speedup_high: float | None = None
    speedup_verdict: str | None = None  # faster, slower, no significant difference, too few
    scaling_efficiency_low: float | None = None  # the speedup's interval over n / baseline n
    scaling_efficiency_high: float | None = None

    def stored(self) -> dict[str, Any]:
        """The row as a scale record stores it: the measured fields only where it measured,
        the trials' evidence only where there is some."""
        row = asdict(self)
        if self.tokens_per_s_global is None:
            for name in _SCALE_MEASURED:
                row.pop(name)
        for name in _SCALE_EVIDENCE:
            if row[name] is None:
                row.pop(name)
        return row

    @classmethod
    def read(cls, row: dict[str, Any]) -> ScaleRow:
        """A stored row (a key this class does not declare is left out)."""
        return cls(**{f.name: row.get(f.name) for f in fields(cls)})


_SCALE_MEASURED = ("tokens_per_s_global", "tokens_per_s_per_device", "speedup",
                   "scaling_efficiency", "mfu")
_SCALE_EVIDENCE = ("trials", "speedup_low", "speedup_high", "speedup_verdict",
                   "scaling_efficiency_low", "scaling_efficiency_high")


@dataclass(frozen=True)
class ScaleMetrics:
    """A scaling study's table (kind 'scale'), beside its per-count training cells: one row a
    device count (bench.scale.scaling_rows: devices, status, global batch, tokens/s, speedup,
    scaling efficiency, MFU) and the count the speedups are over. Written as the rows' stored
    dicts (ScaleRow.stored); read back (read_metrics) as ScaleRow objects."""

    rows: list[dict[str, Any]] | list[ScaleRow] | None = None
    baseline_devices: int | None = None


    @classmethod
    def read(cls, metrics: dict[str, Any]) -> ScaleMetrics:
        """A scale record's metrics dict, its rows as ScaleRow objects."""
        rows = metrics.get("rows")
        return cls(rows=None if rows is None else [ScaleRow.read(r) for r in rows],
                   baseline_devices=metrics.get("baseline_devices"))


@dataclass(frozen=True)
class ScaleRecordSpec(RecordSpec):
    """A scaling study's spec: its device counts, mode and the training spec each count ran."""

    devices: list[int] | None = None
    mode: str | None = None  # strong or weak
    zero: int | None = None
    base: dict[str, Any] | None = None  # the training spec of every count


KINDS = {"scale": RecordKind(ScaleMetrics, read=ScaleMetrics.read, spec=ScaleRecordSpec)}
