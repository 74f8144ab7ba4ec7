"""Table II of the study (device scaling): throughput, speedup and scaling efficiency per
device count from kind 'scale' summary records (metrics.rows), with the spread of each
count's cell, beside the paper's per-system scaling efficiencies."""

from __future__ import annotations

from accelbench.config.record_kinds import carries
from accelbench.config.records.scale import ScaleMetrics, ScaleRow
from accelbench.report.cells import (
    Rate,
    is_training,
    latest,
    num,
    pct,
    points_series,
    train_rate,
    varying_label,
)
from accelbench.report.content import PUBLISHED, Figure, Finding, Panel, Section, Series, Table
from accelbench.report.evidence import stored_speedup_text
from accelbench.report.findings import prefixed
from accelbench.report.machines import Machine
from accelbench.report.paper import TABLE_II, TABLE_II_NOTE, cite
from accelbench.report.predict import (
    HEADER,
    prediction_text,
    train_prediction,
)
from accelbench.report.trial_display import pct_interval, scale_speedup_text
from accelbench.store.record import Record

SOURCE = ("kind 'scale' summary records (metrics.rows: devices, tokens_per_s_global, speedup, "
          "scaling_efficiency) and their per-count 'train' cells (spec.scale_devices, same "
          f"run_id) for the spread; the study's table II ({cite('table II')})")


def _summaries(machines: list[Machine]) -> list[tuple[Machine, Record]]:
    found = []
    for m in machines:
        summaries = [r for r in m.records if carries(r.kind, ScaleMetrics)]
        chosen = latest(summaries, lambda r: (r.setup.model_name, r.setup.mode,
                                              tuple(r.setup.devices or ()),
                                              r.setup.zero, str(r.setup.base)))
        found += [(m, r) for r in chosen.values()]
    return found


def _cells(machine: Machine, summary: Record) -> dict[int, Record]:
    """The summary's per-count cells: same run, spec.scale_devices."""
    return {r.setup.scale_devices: r for r in machine.records
            if is_training(r) and r.run_id == summary.run_id
            and r.setup.scale_devices is not None}


def _precision(summary: Record) -> str:
    return ",".join((summary.setup.base or {}).get("dtypes") or ["?"])


def _global_rate(row: ScaleRow, cell: Record | None) -> Rate | None:
    """The row's global tokens/s, with the spread of its cell's steps where it is there."""
    if row.tokens_per_s_global is None:
        return None
    spread = train_rate(cell, per_device=False) if cell is not None else None
    if spread is None:
        return Rate(row.tokens_per_s_global)
    return spread.scaled(row.tokens_per_s_global / spread.value)


def _speedup(row: ScaleRow, base: ScaleRow | None) -> str:
    """The summary's speedup in the words of every claim of the report (evidence.py: its 95%
    interval from both counts' trials, 'no significant difference' where it holds 1)."""
    if row.speedup is not None and row.devices == row.baseline_devices:
        return scale_speedup_text(row)
    n = ((base.trials if base else None) or 1, row.trials or 1)
    return stored_speedup_text(row.speedup, row.speedup_low, row.speedup_high,
                               row.speedup_verdict, n)


def _efficiency(row: ScaleRow) -> Rate | None:
    """Scaling efficiency with its 95% interval (the speedup's over the device ratio); the
    baseline's is exact (1 by definition: a bar of no width)."""
    if row.scaling_efficiency is None:
        return None
    if row.devices == row.baseline_devices:
        return Rate(row.scaling_efficiency, row.scaling_efficiency, row.scaling_efficiency)
    return Rate(row.scaling_efficiency, row.scaling_efficiency_low, row.scaling_efficiency_high)


def _rows(label: str, summary: Record, cells: dict[int, Record]) -> list[tuple[str, ...]]:
    rows = []
    scale_rows = summary.typed.rows or []
    base = next((r for r in scale_rows if r.devices == r.baseline_devices), None)
    for row in scale_rows:
        cell = cells.get(row.devices)
        tokens = _global_rate(row, cell)
        ok = row.status == "ok"
        rows.append((label, str(row.devices), "does not fit" if row.status == "oom"
                     else str(row.status), tokens.text() if tokens else "-",
                     num(row.tokens_per_s_per_device), _speedup(row, base),
                     pct_interval(row.scaling_efficiency, row.scaling_efficiency_low,
                                  row.scaling_efficiency_high),
                     pct(row.mfu, 2), str(row.baseline_devices),
                     prediction_text(train_prediction(cell)) if ok and cell else "-"))
    return rows


def _published_series() -> list[Series]:
    return [Series(f"published: {p.system}", (float(p.devices),), (p.efficiency,),
                   kind=PUBLISHED) for p in TABLE_II]


def _figure(items: list[tuple[str, Record, dict[int, Record]]]) -> Figure:
    eff, tokens = [], []
    for label, summary, cells in items:
        rows = summary.typed.rows or []
        eff.append(points_series(label, [(r.devices, _efficiency(r), r.status == "oom")
                                         for r in rows]))
        tokens.append(points_series(label, [(r.devices, _global_rate(r, cells.get(
            r.devices)), r.status == "oom") for r in rows]))
    return Figure("table2_scaling", "Device scaling: efficiency and throughput",
                  (Panel("scaling efficiency", "devices", "scaling efficiency (fraction)",
                         tuple(eff + _published_series()), True),
                   Panel("throughput", "devices", "tokens/s (all devices)", tuple(tokens), True,
                         "no scale records")),
                  "The study's table II as a figure: scaling efficiency and global tokens/s "
                  "against devices. Hollow squares: the efficiencies the paper states at each "
                  "system's largest count.",
                  "Scaling efficiency: the speedup over the smallest count that ran over the "
                  "device ratio, its interval the speedup's over that ratio (drawn where every "
                  "count ran 5 or more trials).")


def _finding(label: str, summary: Record, many: bool) -> Finding | None:
    """'Device scaling (gpt2-tiny weak, 1 to 2 ranks): 2 over 1: 1.63x [1.48, 1.83], scaling
    efficiency 81.4% [73.8-91.4%]'."""
    rows = summary.typed.rows or []
    base = next((r for r in rows if r.devices == r.baseline_devices), None)
    if base is None:
        return None
    parts = []
    for row in rows:
        if row is base:
            continue
        if row.status != "ok":
            parts.append(f"{row.devices}: {'does not fit' if row.status == 'oom' else row.status}")
            continue
        parts.append(f"{row.devices} over {base.devices}: {_speedup(row, base)}, scaling "
                     "efficiency " + pct_interval(row.scaling_efficiency,
                                                  row.scaling_efficiency_low,
                                                  row.scaling_efficiency_high))
    s = summary.setup
    counts = [r.devices for r in rows]
    what = (f"Device scaling ({s.model_name} {s.mode}, {min(counts)} to "
            f"{max(counts)} ranks): ")
    text = what + ("; ".join(parts) or "one count ran: nothing to compare")
    return Finding(prefixed(label, text, many), "scaling")


def scaling_section(machines: list[Machine]) -> Section:
    """Table II: our scaling rows beside the paper's per-system efficiencies."""
    summaries = _summaries(machines)
    labels = varying_label([{"machine": m.label, "model": str(r.setup.model_name),
                             "mode": f"{r.setup.mode} scaling", "precision": _precision(r)}
                            for m, r in summaries])
    items = [(lab, r, _cells(m, r)) for lab, (m, r) in zip(labels, summaries, strict=True)]
    published = Table("Published scaling efficiencies (GPT-2 XL)",
                      ("system", "devices", "scaling efficiency", "note", "source"),
                      tuple((p.system, str(p.devices), pct(p.efficiency), p.note,
                             cite("table II")) for p in TABLE_II),
                      "The paper's efficiencies, drawn in the figure.", TABLE_II_NOTE, ())
    ours = Table("Our scaling rows", ("series", "devices", "status", "tokens/s (all devices)",
                                      "tokens/s per device", "speedup", "scaling efficiency",
                                      "MFU", "over devices",
                                      f"planner tokens/s per device {HEADER}"),
                 tuple(row for lab, r, cells in items for row in _rows(lab, r, cells)),
                 "Speedup and scaling efficiency over the smallest count that ran ('over "
                 "devices'), each with its 95% interval.",
                 "As the figure's.")
    text = () if items else ("No scale records: the figure shows the paper's published "
                             "efficiencies alone.",)
    found = tuple(f for lab, r, _ in items if (f := _finding(lab, r, len(items) > 1)))
    return Section("scaling", "Device scaling (table II)", SOURCE, text, (_figure(items),),
                   (ours, published) if items else (published,), found)
