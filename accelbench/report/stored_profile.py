"""A stored machine profile read back: the newest 'profile' record of a store (or one by id)
as analytics.profile.MachineProfile, the dataclass the planner reads; and a profile refined
with the store's measured block cells (`accelbench calibrate --from-block`)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from accelbench.analytics.machine_profile import (
    MachineProfile,
    Point,
    block_shape,
    curve_key,
    point_dict,
    point_from_dict,
    profile_from_metrics,
)
from accelbench.bench.outcome import Outcome
from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig
from accelbench.config.record_kinds import carries
from accelbench.config.records.block import BlockMetrics
from accelbench.config.records.profile import ProfileMetrics
from accelbench.report.table import add_plain_row, plain_table
from accelbench.report.table_width import KEY
from accelbench.store.record import Record
from accelbench.store.store import ResultStore

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
        if record is None or not carries(record.kind, ProfileMetrics) \
                or record.status != "ok":
            raise ConfigError("profile", f"record {record_id} is not a measured profile",
                              "the id of a 'profile' record with status ok")
    return profile_from_metrics(record.typed, record.environment,
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
    for column, priority in (("curve", KEY), ("call", 1), ("median ms", KEY), ("IQR ms", 2),
                             ("n", 3), ("rate", KEY), ("of peak / algbw", 1)):
        table.add_column(column, justify="left" if column in ("curve", "call") else "right",
                         priority=priority)
    peaks = record.typed.peak_flops_per_s_by_dtype or {}
    for point in map(point_from_dict, record.typed.points or []):
        add_plain_row(table, point.curve, point.label, f"{1e3 * point.time_s_median:.3f}",
                      f"{1e3 * point.time_s_iqr:.3f}", point.samples, _rate(point),
                      _fraction(point, peaks))
    labels = record.typed.peak_label_by_dtype or {}
    table.caption = Text("; ".join(f"{d} peak {peaks[d] / 1e12:.3f} TFLOP/s ({labels.get(d)})"
                               for d in sorted(peaks)) or "no precision peak")
    return table


def block_points(records: list[Record]) -> list[Point]:
    """Each successful block record as two points, its forward and its backward, on the block
    curve of its precision and shape (analytics.profile.block_shape): the phase's FLOPs per
    call (the record's, analytics/flops.py block_flops) and its timings."""
    points = []
    for record in records:
        s = record.setup
        if not carries(record.kind, BlockMetrics) or record.status != "ok" or s.model is None:
            continue
        cfg, seq = ModelConfig(**s.model), int(s.seq_len)
        for phase in ("forward", "backward"):
            m = record.typed.phase(phase)
            flops, median = m.flops, m.time_s_median
            if not flops or not median:
                continue
            points.append(Point(
                "block", curve_key("block", s.dtype, phase, block_shape(cfg, seq)),
                f"block {cfg.name} b={s.batch} s={seq} {phase} (record {record.id})",
                s.dtype, float(flops), float(flops), float(median),
                float(m.time_s_min), float(m.time_s_max), float(m.time_s_iqr), int(m.samples),
                {"batch": s.batch, "seq": seq, "record_id": record.id}))
    return points


def _same_machine(record: Record, base: Record, threads: int) -> bool:
    """A record of the base profile's device, at the profile's torch threads."""
    env, base_env = record.environment, base.environment
    return (env.get("device_name") == base_env.get("device_name")
            and env.get("host") == base_env.get("host")
            and int(env.get("torch_threads") or 0) == threads)


def profile_with_blocks(store: ResultStore, threads: int = 0) -> tuple[Outcome, dict]:
    """A new profile outcome (and its environment): the newest measured profile at `threads`
    torch threads (0: the newest with block records at its thread count), its own points
    kept, plus a block curve point for each successful block record of the same machine at
    those threads. Its spec names the base profile and the block records. No profile, or no
    block record at a profile's threads: one line, exit 2."""
    profiles = [r for r in store.query(kind=PROFILE_KIND, status="ok")
                if not threads or int(r.typed.threads or 0) == threads]
    if not profiles:
        at = f" at {threads} threads" if threads else ""
        raise ConfigError("from-block", f"no measured profile{at} in '{store.path}'",
                          "run 'accelbench calibrate' on this machine first")
    block_records = store.query(kind="block", status="ok")
    for base in reversed(profiles):
        at = int(base.typed.threads or 0)
        blocks = [r for r in block_records if _same_machine(r, base, at)]
        points = block_points(blocks)
        if points:
            break
    else:
        counts = sorted({int(r.typed.threads or 0) for r in profiles})
        raise ConfigError("from-block", f"no block record of this machine at "
                          f"{' or '.join(map(str, counts))} threads in '{store.path}'",
                          "run 'accelbench block' at a profile's thread count first")
    kept = [p for p in base.typed.points or [] if p.get("op") != "block"]
    metrics = dict(base.metrics, points=kept + [point_dict(p) for p in points])
    ids = sorted({r.id for r in blocks})
    spec = {**base.spec, "from_block": ids, "base_profile": base.id}
    reason = (f"profile {base.id} with {len(points)} block points from records "
              f"{', '.join(map(str, ids))}")
    return Outcome(PROFILE_KIND, "ok", spec, metrics, reason=reason), base.environment
