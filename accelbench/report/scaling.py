"""Table II of the study (device scaling): throughput, speedup and scaling efficiency per
device count from kind 'scale' summary records (metrics.rows), with the spread of each
count's cell, beside the paper's per-system scaling efficiencies."""

from __future__ import annotations

from accelbench.config.schema import ScaleRow
from accelbench.report.cells import (
    SCALE_CELL,
    SPREAD,
    Rate,
    latest,
    num,
    pct,
    points_series,
    train_rate,
    varying_label,
)
from accelbench.report.content import PUBLISHED, Figure, Panel, Section, Series, Table
from accelbench.report.evidence import stored_speedup_text
from accelbench.report.machines import Machine
from accelbench.report.paper import TABLE_II, TABLE_II_NOTE, cite
from accelbench.report.predict import (
    HEADER,
    INTERVAL_NOTE,
    prediction_text,
    train_prediction,
)
from accelbench.report.trials import pct_interval, scale_speedup_text
from accelbench.store.record import Record

SOURCE = ("kind 'scale' summary records (metrics.rows: devices, tokens_per_s_global, speedup, "
          "scaling_efficiency) and their per-count 'train' cells (spec.scale_devices, same "
          f"run_id) for the spread; the study's table II ({cite('table II')})")


def _summaries(machines: list[Machine]) -> list[tuple[Machine, Record]]:
    found = []
    for m in machines:
        summaries = [r for r in m.records if r.kind == "scale"]
        chosen = latest(summaries, lambda r: (r.spec.get("model_name"), r.spec.get("mode"),
                                              tuple(r.spec.get("devices") or ()),
                                              r.spec.get("zero"), str(r.spec.get("base"))))
        found += [(m, r) for r in chosen.values()]
    return found


def _cells(machine: Machine, summary: Record) -> dict[int, Record]:
    """The summary's per-count cells: same run, spec.scale_devices."""
    return {r.spec[SCALE_CELL]: r for r in machine.records
            if r.kind == "train" and r.run_id == summary.run_id and SCALE_CELL in r.spec}


def _precision(summary: Record) -> str:
    return ",".join((summary.spec.get("base") or {}).get("dtypes") or ["?"])


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
                  "Table II of the study as a figure: scaling efficiency (speedup over the "
                  "smallest count that ran, divided by the device ratio; error bars: the "
                  "speedup's 95% interval from both counts' trials over that ratio, where each "
                  "ran 5 or more, drawn only where every count of the series has one) and "
                  f"global tokens/s with error bars ({SPREAD}); hollow squares: "
                  f"the efficiencies the paper states at each system's largest count "
                  f"({cite('table II')}).")


def scaling_section(machines: list[Machine]) -> Section:
    """Table II: our scaling rows beside the paper's per-system efficiencies."""
    summaries = _summaries(machines)
    labels = varying_label([{"machine": m.label, "model": str(r.spec.get("model_name")),
                             "mode": f"{r.spec.get('mode')} scaling", "precision": _precision(r)}
                            for m, r in summaries])
    items = [(lab, r, _cells(m, r)) for lab, (m, r) in zip(labels, summaries, strict=True)]
    published = Table("Published scaling efficiencies (GPT-2 XL)",
                      ("system", "devices", "scaling efficiency", "note", "source"),
                      tuple((p.system, str(p.devices), pct(p.efficiency), p.note,
                             cite("table II")) for p in TABLE_II), TABLE_II_NOTE)
    ours = Table("Our scaling rows", ("series", "devices", "status", "tokens/s (all devices)",
                                      "tokens/s per device", "speedup", "scaling efficiency",
                                      "MFU", "over devices",
                                      f"planner tokens/s per device {HEADER}"),
                 tuple(row for lab, r, cells in items for row in _rows(lab, r, cells)),
                 "Speedup over the smallest count that ran ('over devices'), with the 95% "
                 "interval of the ratio of median throughputs from both counts' trials and "
                 "what it supports ('no significant difference' where it holds 1; too few "
                 "samples under 5 trials a count; one trial: no interval); scaling "
                 "efficiency's [low-high] is that interval over the device ratio; "
                 f"(low-high) of each count's tokens/s: {SPREAD}; planner: "
                 f"{INTERVAL_NOTE}.")
    text = () if items else ("No scale records: the figure shows the paper's published "
                             "efficiencies alone.",)
    return Section("scaling", "Device scaling (table II)", SOURCE, text, (_figure(items),),
                   (ours, published) if items else (published,))
