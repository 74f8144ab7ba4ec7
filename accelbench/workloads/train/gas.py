"""Figure 6 of the study (gradient accumulation): tokens/s and the speedup over GAS 1
against GAS, from kind 'train' records whose cells differ only in GAS, with the paper's
published GAS speedups drawn beside ours, labelled with their system."""

from __future__ import annotations

from accelbench.report.cells import (
    Rate,
    canonical,
    points_series,
    status_text,
    train_rate,
    varying_label,
    wide_range,
)
from accelbench.report.content import PUBLISHED, Figure, Finding, Panel, Section, Series, Table
from accelbench.report.evidence import speedup, speedup_text
from accelbench.report.findings import prefixed, verdicts_text
from accelbench.report.machines import Machine
from accelbench.report.paper import FIG6_GAS, cite
from accelbench.report.predict import (
    HEADER,
    prediction_text,
    train_prediction,
)
from accelbench.report.training import training_cells
from accelbench.store.record import Record

SOURCE = ("kind 'train' records (benchmark train) that differ only in GAS: "
          "tokens_per_s_per_device with intervals (6+ trials) else step_time_s_min/max; the "
          "study's figure 6 "
          f"({cite('fig. 6')}), whose stated speedups are drawn beside ours")
GROUP_FIELDS = ("model_name", "seq_len", "micro_batch", "dtype", "recompute", "compile", "tf32",
                "data")


def _groups(machines: list[Machine]) -> dict[tuple, list[Record]]:
    """(machine, cell less GAS) -> its records by GAS; only groups with two GAS values or more."""
    groups: dict[tuple, list[Record]] = {}
    for m, r in training_cells(machines, "train"):
        key = (m.index, m.label, *(canonical(getattr(r.setup, f)) for f in GROUP_FIELDS),
               canonical(r.setup.layout))
        groups.setdefault(key, []).append(r)
    return {k: sorted(v, key=lambda r: r.setup.gas) for k, v in groups.items()
            if len({r.setup.gas for r in v}) > 1}


def _labels(groups: dict[tuple, list[Record]]) -> list[str]:
    parts = []
    for key, records in groups.items():
        s = records[0].setup
        parts.append({"machine": key[1], "model": str(s.model_name),
                      "precision": str(s.dtype), "seq": f"seq {s.seq_len}",
                      "mb": f"micro-batch {s.micro_batch}",
                      "recompute": f"recompute {s.recompute}"})
    return varying_label(parts)


def _base(records: list[Record]) -> Rate | None:
    """The GAS 1 cell's tokens/s, when it ran."""
    ones = [r for r in records if r.setup.gas == 1 and r.status == "ok"]
    return train_rate(ones[0]) if ones else None


def _speedup(r: Record, base: Rate | None) -> Rate | None:
    rate = train_rate(r) if r.status == "ok" else None
    return rate.scaled(1 / base.value) if rate and base else None


def published_series() -> list[Series]:
    """The paper's GAS speedups, from 1.0 at GAS 1, each labelled with its system."""
    return [Series(f"published: {p.system}, {p.setup}", (1.0, float(p.gas)), (1.0, p.speedup),
                   kind=PUBLISHED) for p in FIG6_GAS]


def _figure(groups: dict[tuple, list[Record]], labels: list[str]) -> Figure:
    items = list(zip(labels, groups.values(), strict=True))
    xs = [float(p.gas) for p in FIG6_GAS] + [r.setup.gas for _, rs in items for r in rs]
    tokens = [points_series(lab, [(r.setup.gas, train_rate(r) if r.status == "ok" else None,
                                   r.status == "oom") for r in rs]) for lab, rs in items]
    speedups = [points_series(lab, [(r.setup.gas, _speedup(r, _base(rs)),
                                     r.status == "oom") for r in rs]) for lab, rs in items]
    empty = "no records with more than one GAS value"
    return Figure("fig6_gas", "Gradient accumulation: throughput and speedup against GAS",
                  (Panel("throughput", "gradient accumulation steps (GAS)",
                         "tokens/s per device", tuple(tokens), wide_range(xs), empty),
                   Panel("speedup over GAS 1", "gradient accumulation steps (GAS)",
                         "speedup (tokens/s over GAS 1)",
                         tuple(speedups + published_series()), wide_range(xs))),
                  "The study's figure 6: tokens/s and the speedup over GAS 1 against gradient "
                  "accumulation steps. Hollow squares: the speedups the paper states, "
                  "labelled with their system.")


def _rows(groups: dict[tuple, list[Record]], labels: list[str]) -> tuple[tuple[str, ...], ...]:
    rows = []
    for label, records in zip(labels, groups.values(), strict=True):
        base = _base(records)
        ones = [r for r in records if r.setup.gas == 1 and r.status == "ok"]
        for r in records:
            rate, speed = train_rate(r) if r.status == "ok" else None, _speedup(r, base)
            claim = speedup_text(ones[0], r, speed.value) if speed and ones else "-"
            rows.append((label, str(r.setup.gas), status_text(r),
                         rate.text() if rate else "-", claim,
                         prediction_text(train_prediction(r)) if r.status == "ok" else "-"))
    return tuple(rows)


def _findings(groups: dict[tuple, list[Record]], labels: list[str]) -> tuple[Finding, ...]:
    """Per series: every GAS over GAS 1 in one phrase ('no significant difference at 2, 4, 8
    (0.93x-1.00x)')."""
    found = []
    for label, records in zip(labels, groups.values(), strict=True):
        ones = [r for r in records if r.setup.gas == 1 and r.status == "ok"]
        if not ones:
            continue
        base = _base(records)
        items = [(str(r.setup.gas), speedup(ones[0], r), up.value if (up := _speedup(r, base))
                  else None) for r in records if r.setup.gas != 1 and r.status == "ok"]
        gas = [r.setup.gas for r in records]
        text = (f"Gradient accumulation {min(gas)} to {max(gas)} over GAS 1: "
                + verdicts_text(items))
        found.append(Finding(prefixed(label, text, len(groups) > 1), "gas"))
    return tuple(found)


def gas_section(machines: list[Machine]) -> Section:
    """Figure 6 and its table, with the paper's stated speedups."""
    title = "Gradient accumulation (figure 6)"
    groups = _groups(machines)
    labels = _labels(groups)
    published = Table("Published GAS speedups", ("system", "setup", "GAS", "speedup over GAS 1",
                                                  "source"),
                      tuple((p.system, p.setup, f"1 -> {p.gas}", f"{p.speedup:.2f}x",
                             cite("fig. 6")) for p in FIG6_GAS),
                      "The paper's speedups, drawn in the figure.", headline=())
    text = () if groups else ("No training records with more than one GAS value: the figure "
                              "shows the paper's published speedups alone.",)
    ours = Table("Our GAS cells", ("series", "GAS", "status", "tokens/s per device",
                                   "speedup over GAS 1", f"planner tokens/s per device {HEADER}"),
                 _rows(groups, labels),
                 "Tokens/s per device and the speedup over the same cell at GAS 1, each with "
                 "its interval.")
    tables = (ours, published) if groups else (published,)
    return Section("gas", title, SOURCE, text, (_figure(groups, labels),), tables,
                   _findings(groups, labels))
