"""The noise workload in tables and the report: what `accelbench noise` printed (its table) and
each machine's latest A/A check (the report's "Noise floor" section); the floor itself, which
every comparison states, is report/noise_floor.py (docs/metrics.md, "The noise floor")."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from accelbench.report.content import Finding, Section, Table
from accelbench.report.machines import Machine
from accelbench.report.noise_floor import (
    COMMAND,
    config_text,
    disturbed_text,
    floor_text,
    latest_noise,
    ratio_text,
    when,
)
from accelbench.report.table import add_columns, add_plain_row, plain_table
from accelbench.report.table_width import KEY
from accelbench.store.record import Record

SOURCE = ("the latest ok 'noise' record of each machine: throughput_ratio with "
          "throughput_ratio_low/_high, noise_verdict, noise_floor, trials, disturbed, "
          "created_utc")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.2f}"


def noise_table(records: list[Record], title: str = "Noise floor (A/A)") -> Any:
    """One row a check: configuration, status, B over A with its interval, the verdict, the
    floor, trials a condition, each condition's median step, disturbed."""
    table = plain_table(title)
    add_columns(table, {"configuration": KEY, "status": KEY, "B/A throughput": KEY,
                        "verdict": KEY, "noise floor": KEY, "trials": 2, "A step ms": 3,
                        "B step ms": 3, "disturbed?": 1, "note": 4},
                left=("configuration", "verdict", "note"))
    for r in records:
        m = r.typed
        add_plain_row(table, config_text(r), r.status, ratio_text(m), m.noise_verdict or "-",
                      floor_text(m), f"{m.trials}+{m.trials}" if m.trials else "-",
                      _ms(m.step_time_s_median_a), _ms(m.step_time_s_median_b),
                      disturbed_text(m.disturbed), r.reason)
    table.caption = Text(
        "Two identical conditions A and B, interleaved over trials (each a model built anew); "
        "B/A: ratio of median throughputs with its 95% bootstrap interval (n.s.: no "
        "significant difference, as an A/A check should find); noise floor: that interval's "
        "larger distance from 1, the smallest difference this machine can tell from noise.")
    return table


def noise_section(machines: list[Machine]) -> Section:
    """Per machine, its latest noise check: the floor, the verdict, when, whether disturbed;
    the floor as a finding."""
    rows, missing, found = [], [], []
    for m in machines:
        check = latest_noise(m)
        if check is None:
            missing.append(m.label)
            continue
        t = check.typed
        rows.append((m.label, config_text(check), floor_text(t), t.noise_verdict or "-",
                     ratio_text(t), f"{t.trials}+{t.trials}" if t.trials else "-", when(check),
                     disturbed_text(t.disturbed)))
        text = (f"Noise floor (A/A check, {config_text(check)}): {floor_text(t)}, "
                f"{t.noise_verdict or '-'} ({ratio_text(t)})"
                + (", measured while disturbed" if t.disturbed else "")
                + "; a difference within it is not evidence")
        found.append(Finding(f"{m.label}: {text}" if len(machines) > 1 else text, "noise"))
    text = ()
    if missing:
        text += (f"No noise check on {', '.join(missing)}: run {COMMAND} there.",)
    tables = (Table("Noise floor per machine", ("machine", "configuration", "noise floor",
                                                "verdict", "B/A throughput", "trials", "when",
                                                "disturbed?"), tuple(rows),
                    "Each machine's latest A/A check: the smallest difference it can tell "
                    "from noise."),) if rows else ()
    method = ("An A/A check measures one configuration as two identical conditions, "
              "interleaved; the noise floor is how far apart they came out (the 95% interval's "
              "larger distance from 1). A comparison whose difference is within its machine's "
              "floor is not evidence of a difference (docs/metrics.md).")
    return Section("noise", "Noise floor", SOURCE, text, (), tables, tuple(found), (method,))
