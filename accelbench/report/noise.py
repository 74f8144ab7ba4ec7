"""The noise floor in tables and the report: what `accelbench noise` printed (its table), each
machine's latest A/A check (the report's "Noise floor" section), and the sentence the
comparison section states beside its ratios (docs/metrics.md, "The noise floor")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from accelbench.config.schema import NoiseMetrics
from accelbench.report.content import Finding, Section, Table
from accelbench.report.fit import KEY
from accelbench.report.machines import Machine
from accelbench.report.table import add_columns, add_plain_row, plain_table
from accelbench.report.trials import claim_text
from accelbench.store.record import Record

NOISE_KIND = "noise"  # bench/noise.py's record kind
COMMAND = "`accelbench noise`"
SOURCE = ("the latest ok 'noise' record of each machine: throughput_ratio with "
          "throughput_ratio_low/_high, noise_verdict, noise_floor, trials, disturbed, "
          "created_utc")


def floor_text(m: NoiseMetrics) -> str:
    """'±2.3%' (the noise floor), or '-' without an interval."""
    return "-" if m.noise_floor is None else f"±{100 * m.noise_floor:.1f}%"


def ratio_text(m: NoiseMetrics) -> str:
    """B's throughput over A's with its interval: '1.01x [0.97-1.04]' (n.s. where it holds 1)."""
    return claim_text(m.throughput_ratio, m.throughput_ratio_low, m.throughput_ratio_high,
                      m.noise_verdict)


def disturbed_text(disturbed: bool | None) -> str:
    """yes, no, or '-' (not judged)."""
    return "-" if disturbed is None else ("yes" if disturbed else "no")


def config_text(record: Record) -> str:
    """'gpt2-tiny seq 64 mb 1 fp32'."""
    s = record.spec
    return (f"{s.get('model_name')} seq {s.get('seq_len')} mb {s.get('micro_batch')} "
            f"{s.get('dtype')}")


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


def latest_noise(machine: Machine) -> Record | None:
    """The machine's latest ok noise check, or None."""
    checks = [r for r in machine.records if r.kind == NOISE_KIND and r.status == "ok"]
    return max(checks, key=lambda r: (r.created_utc, r.id or 0), default=None)


def when(record: Record) -> str:
    """'2025-01-31 12:34 UTC'."""
    return f"{record.created_utc[:16].replace('T', ' ')} UTC"


def noise_sentence(machines: Sequence[Machine]) -> str:
    """The comparison section's sentence: each machine's noise floor, or that none was
    measured (and how to measure it)."""
    parts, missing = [], []
    for m in machines:
        check = latest_noise(m)
        if check is None or check.typed.noise_floor is None:
            missing.append(m.label)
        else:
            parts.append(f"{m.label} ±{100 * check.typed.noise_floor:.1f}% "
                         f"({config_text(check)}, {when(check)})")
    if not parts:
        return (f"No noise floor was measured on any machine ({COMMAND}): how large a "
                "difference must be to stand out from run-to-run spread is unknown here.")
    text = ("Noise floor (an A/A check, the smallest difference each machine tells from "
            f"noise): {'; '.join(parts)}")
    return text + (f"; none measured on {', '.join(missing)} ({COMMAND})." if missing else ".")


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
