"""Machines compared by energy: what each machine's best cell of a workload measured per token
(over its timed steps, docs/energy.md), scaled to a stated number of tokens. The table has a
workload only when every machine that ran it has the figure; otherwise the report says
'unavailable: <reason>' with each machine's reason, and nothing is estimated.

A figure the counter cannot carry is not shown, with the reason (`not_shown`): a window under
10 updates of the counter (the H200's block windows: a joule count over a window that short
gave 1,390 W on a 700 W card), or an average power above the most the device itself reported
in the window (no device draws more on average than at its highest reading)."""

from __future__ import annotations

from typing import Any

from accelbench.config.record_kinds import carries
from accelbench.config.records.fields import EnergyFields
from accelbench.report.cells import num
from accelbench.report.content import Table
from accelbench.store.record import Record

J_PER_KWH = 3.6e6
NOT_RECORDED = "not recorded (a record older than energy metering)"


POWER_MARGIN = 1.05  # an average above the highest reading by more than this is impossible


def _energy(record: Record) -> EnergyFields | None:
    """A cell's energy fields, or None for a kind that meters none."""
    return record.typed if carries(record.kind, EnergyFields) else None


def not_shown(record: Record) -> str | None:
    """Why a recorded energy figure is not shown (the counter cannot carry it), or None."""
    m = _energy(record)
    if m is None or m.energy_per_token_j is None:
        return None
    if m.energy_window_too_short:
        return (f"not shown: the timed window ({m.energy_window_s or 0:.3g} s) is under 10 "
                f"updates of the {m.energy_source} counter ({m.energy_interval_s or 0:g} s)")
    for avg, top in zip(m.avg_power_w_per_device or [], m.peak_power_w_per_device or [],
                        strict=False):
        if top and avg > top * POWER_MARGIN:
            return (f"not shown: average power {avg:,.0f} W is above the most the device "
                    f"reported ({top:,.0f} W): the counter did not cover the window")
    return None


def energy_per_token(record: Record) -> float | None:
    """J per token of a cell's timed steps, None where it has none or it is not shown."""
    m = _energy(record)
    return None if m is None or not_shown(record) else m.energy_per_token_j


def why_none(record: Record) -> str:
    """Why a record shows no energy figure: not shown (not_shown), or its own reason."""
    m = _energy(record)
    if m is None:
        return "its kind meters no energy"
    note = not_shown(record) or m.energy_note
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
    return (name, precision, best.machine.label, f"{m.energy_source}",
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
                 "Each machine's best cell: its joules per token over the timed steps, times "
                 "the stated tokens.",
                 "Sources measure different things: nvml, amdsmi and hlml the accelerator "
                 "board, rapl the host's CPU packages and DRAM; a workload is listed only when "
                 "every machine that ran it has a figure, and a figure is not shown where its "
                 "window is under 10 counter updates or its average power is above the most "
                 "the device reported.")


def unavailable_text(best: dict[tuple, list[Any]]) -> str:
    """One line: each machine's reason for having no energy figure."""
    reasons = {b.machine.label: why_none(b.record) for items in best.values() for b in items
               if energy_per_token(b.record) is None}
    listed = "; ".join(f"{label}: {why}" for label, why in reasons.items())
    return f"Energy: unavailable for some machine of every workload ({listed})."
