"""What a bundle says about its records, derived from them (so a reader checks it against them):
each machine with its environment, the peaks its MFU divided by and where each came from, and
its noise floor; each workload fingerprint with the fields it identifies. And the paper's
published figures, carried by a reference bundle only, each checked as untrusted input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.config.errors import ConfigError
from accelbench.config.record_kinds import carries
from accelbench.config.records.fields import PeakFields
from accelbench.hardware.specs import get_spec
from accelbench.report.machines import Machine, group_machines
from accelbench.report.noise_floor import config_text, latest_noise
from accelbench.report.paper import FIG6_GAS, FIG7_SPARSITY, TABLE_II, cite
from accelbench.store.fingerprint import workload_id, workload_identity
from accelbench.store.record import Record
from accelbench.store.validate import matches

MAX_PUBLISHED = 10_000
MAX_PUBLISHED_TEXT = 2_000
PUBLISHED_FIELDS: dict[str, Any] = {
    "figure": str, "system": str, "quantity": str, "setup": str, "note": str, "source": str,
    "value": float, "low": float | None, "high": float | None}


def _provenance(environment: dict[str, Any], label: str) -> str:
    """Where a peak came from: the datasheet row's source, or the label of a measured one."""
    if not label.startswith("datasheet"):
        return label
    key = environment.get("device_spec_key")
    try:
        return f"{label}: {get_spec(key).source}" if isinstance(key, str) else label
    except ConfigError:
        return label


def peaks(machine: Machine) -> list[dict[str, Any]]:
    """Each distinct peak the machine's cells divided by: precision, FLOP/s, label, source."""
    found: dict[tuple, dict[str, Any]] = {}
    for r in machine.records:
        if not carries(r.kind, PeakFields):
            continue
        m = r.typed
        if m.peak_flops_per_s_per_device is None:
            continue
        label = str(m.peak_label or "none")
        key = (m.peak_precision, m.peak_flops_per_s_per_device, label)
        found.setdefault(key, {"precision": m.peak_precision,
                               "flops_per_s_per_device": m.peak_flops_per_s_per_device,
                               "label": label,
                               "source": _provenance(machine.environment, label)})
    return list(found.values())


def noise_floor(machine: Machine) -> dict[str, Any] | None:
    """The machine's latest ok A/A check: its floor, configuration, when, and its uid."""
    check = latest_noise(machine)
    if check is None:
        return None
    return {"floor": check.typed.noise_floor, "configuration": config_text(check),
            "created_utc": check.created_utc, "uid": check.uid}


def _machine(m: Machine) -> dict[str, Any]:
    dates = sorted(r.created_utc for r in m.records)
    return {"fingerprint": m.key, "name": m.name, "environment": m.environment,
            "records": len(m.records), "first_utc": dates[0], "last_utc": dates[-1],
            "peaks": peaks(m), "noise_check": noise_floor(m)}


def summary(records: Sequence[Record]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(machines, workloads) of a bundle, derived from its records in their order."""
    machines = group_machines([("bundle", r) for r in records]) if records else []
    workloads = {}
    for r in records:
        wid = workload_id(r.kind, r.spec)
        if wid is not None:
            workloads.setdefault(wid, workload_identity(r.kind, r.spec))
    return [_machine(m) for m in machines], workloads


def paper_figures() -> list[dict[str, Any]]:
    """The paper's published figures (report/paper.py), one entry each, with its source."""
    rows = [_entry("table II", p.system, "scaling efficiency (GPT-2 XL)",
                   f"{p.devices} devices", p.efficiency, note=p.note) for p in TABLE_II]
    rows += [_entry("figure 6", g.system, f"throughput speedup, GAS 1 to {g.gas}", g.setup,
                    g.speedup) for g in FIG6_GAS]
    rows += [_entry("figure 7", "CS-2", f"speedup from weight sparsity ({s.model})",
                    "sparsity " + ("not restated" if s.sparsity is None else f"{s.sparsity:g}"),
                    (s.speedup_low + s.speedup_high) / 2, s.speedup_low, s.speedup_high)
             for s in FIG7_SPARSITY]
    return rows


def _entry(figure: str, system: str, quantity: str, setup: str, value: float,
           low: float | None = None, high: float | None = None, note: str = "") -> dict:
    return {"figure": figure, "system": system, "quantity": quantity, "setup": setup,
            "note": note, "source": cite(figure), "value": value, "low": low, "high": high}


def _published_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict) or set(entry) != set(PUBLISHED_FIELDS):
        return f"is not an object with exactly {', '.join(PUBLISHED_FIELDS)}"
    for key, hint in PUBLISHED_FIELDS.items():
        if not matches(entry[key], hint):
            return f"field {key} is not a {getattr(hint, '__name__', 'number or null')}"
        if isinstance(entry[key], str) and len(entry[key]) > MAX_PUBLISHED_TEXT:
            return f"field {key} is over {MAX_PUBLISHED_TEXT:,} characters"
    return None


def published_problem(published: list[Any], contents: str, records: Sequence[Record]
                      ) -> str | None:
    """What is wrong with a bundle's published figures, or None: a reference bundle carries
    them and no records, a measured bundle records and none of them; each entry checked."""
    if contents == "measured" and published:
        return ("holds measured records and published figures: a reference bundle carries "
                "published figures only")
    if contents == "reference" and records:
        return "is a reference bundle holding measured records"
    if len(published) > MAX_PUBLISHED:
        return f"holds {len(published):,} published figures; at most {MAX_PUBLISHED:,}"
    for n, entry in enumerate(published, 1):
        problem = _published_problem(entry)
        if problem:
            return f"published figure {n} {problem}"
    return None
