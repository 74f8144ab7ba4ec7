"""Machines compared by energy: what each machine's best cell of a workload measured per token
(over its timed steps, docs/energy.md), scaled to a stated number of tokens. The table has a
workload only when every machine that ran it has the figure; otherwise the report says
'unavailable: <reason>' with each machine's reason, and nothing is estimated."""

from __future__ import annotations

from typing import Any

from accelbench.report.cells import num
from accelbench.report.content import Table
from accelbench.store.record import Record

J_PER_KWH = 3.6e6
NOT_RECORDED = "not recorded (a record older than energy metering)"


def energy_per_token(record: Record) -> float | None:
    """J per token of a cell's timed steps, None where it has none."""
    return record.typed.energy_per_token_j


def why_none(record: Record) -> str:
    """The record's own reason for having no energy figure."""
    note = record.typed.energy_note
    return str(note) if note else NOT_RECORDED


def energy_text(record: Record, tokens: float) -> str:
    """'12.3 kWh' to train `tokens` tokens at this cell's J/token, or why not."""
    per_token = energy_per_token(record)
    if per_token is None:
        return why_none(record)
    return f"{per_token * tokens / J_PER_KWH:,.3g} kWh"


def _row(name: str, precision: str, best: Any, tokens: float, lowest: float) -> tuple:
    m, per_token = best.record.typed, energy_per_token(best.record)
    watts = m.avg_power_w_per_device or []
    flag = " (window too short)" if m.energy_window_too_short else ""
    return (name, precision, best.machine.label, f"{m.energy_source}{flag}",
            f"{per_token:.3g}", num(m.tokens_per_j, ",.3g"),
            ", ".join(f"{w:,.0f}" for w in watts) or "-",
            f"{per_token * tokens / J_PER_KWH:,.3g}", f"{per_token / lowest:.2f}x")


def energy_table(best: dict[tuple, list[Any]], tokens: float) -> Table | None:
    """Energy to train `tokens` tokens, for the workloads every machine metered; None if none."""
    rows = []
    for (name, precision), items in best.items():
        values = [energy_per_token(b.record) for b in items]
        if any(v is None for v in values):
            continue
        lowest = min(values)
        rows.extend(_row(name, precision, b, tokens, lowest) for b in items)
    if not rows:
        return None
    return Table(f"Energy to train {tokens:,.3g} tokens",
                 ("workload", "precision", "machine", "source", "J per token",
                  "tokens per J", "average W per device", "kWh", "over the lowest"),
                 tuple(rows),
                 "Each machine's best cell (most tokens/s), its joules over the timed steps "
                 "per token, times the stated tokens. Sources measure different things: "
                 "nvml, amdsmi and hlml the accelerator board, rapl the host's CPU packages and "
                 "DRAM; a workload is listed only when every machine that ran it has a figure.")


def unavailable_text(best: dict[tuple, list[Any]]) -> str:
    """One line: each machine's reason for having no energy figure."""
    reasons = {b.machine.label: why_none(b.record) for items in best.values() for b in items
               if energy_per_token(b.record) is None}
    listed = "; ".join(f"{label}: {why}" for label, why in reasons.items())
    return f"Energy: unavailable for some machine of every workload ({listed})."
