"""A stored machine profile read back: the newest 'profile' record of a store (or one by id)
as analytics.profile.MachineProfile, the dataclass the planner reads."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from accelbench.analytics.profile import (
    MachineProfile,
    Point,
    point_from_dict,
    profile_from_metrics,
)
from accelbench.config.errors import ConfigError
from accelbench.results.record import Record
from accelbench.results.store import ResultStore
from accelbench.results.table import add_plain_row, plain_table

PROFILE_KIND = "profile"


def load_profile(store: ResultStore, record_id: int | None = None) -> MachineProfile:
    """The profile of record `record_id`, else the store's newest measured profile; a missing
    one is one line naming the field and how to make one."""
    if record_id is None:
        records = store.query(kind=PROFILE_KIND, status="ok", limit=1)
        if not records:
            raise ConfigError("profile", f"no machine profile in '{store.path}'",
                              "a store where 'accelbench calibrate' has run")
        record = records[0]
    else:
        record = store.get(record_id)
        if record is None or record.kind != PROFILE_KIND or record.status != "ok":
            raise ConfigError("profile", f"record {record_id} is not a measured profile",
                              "the id of a 'profile' record with status ok")
    return profile_from_metrics(record.metrics, record.environment,
                                f"measured (record {record.id}, {record.created_utc[:10]})")


def _rate(point: Point) -> str:
    """TFLOP/s for compute points, GB/s for memory and collective (bus) points."""
    if point.op in ("gemm", "attention"):
        return f"{point.rate_per_s / 1e12:.3f} TFLOP/s"
    return f"{point.rate_per_s / 1e9:.2f} GB/s"


def _fraction(point: Point, peaks: dict[str, float]) -> str:
    """Efficiency against the precision's peak, or a collective's algorithm bandwidth."""
    if point.op in ("gemm", "attention") and peaks.get(point.dtype):
        return f"{100 * point.rate_per_s / peaks[point.dtype]:.1f}%"
    if point.op == "collective":
        return f"algbw {point.shape['algbw_bytes_per_s'] / 1e9:.2f} GB/s"
    return ""


def profile_table(record: Record) -> Table:
    """Every point of a profile record: median time and spread, rate, efficiency."""
    table = plain_table(f"Machine profile ({record.environment.get('device_name', '')})")
    for column in ("curve", "call", "median ms", "IQR ms", "n", "rate", "of peak / algbw"):
        table.add_column(column, justify="left" if column in ("curve", "call") else "right")
    peaks = record.metrics.get("peak_flops_per_s_by_dtype") or {}
    for point in map(point_from_dict, record.metrics.get("points") or []):
        add_plain_row(table, point.curve, point.label, f"{1e3 * point.time_s_median:.3f}",
                      f"{1e3 * point.time_s_iqr:.3f}", point.samples, _rate(point),
                      _fraction(point, peaks))
    labels = record.metrics.get("peak_label_by_dtype") or {}
    table.caption = Text("; ".join(f"{d} peak {peaks[d] / 1e12:.3f} TFLOP/s ({labels.get(d)})"
                               for d in sorted(peaks)) or "no precision peak")
    return table
