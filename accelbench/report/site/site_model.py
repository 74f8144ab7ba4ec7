"""What the site shows, computed from bundles before any page is written: machines (told apart
by the one machine fingerprint, across bundles), each measured cell with its throughput and
spread, grouped by the workload fingerprint it ran (computed from its spec here, never taken
from the file), and each workload's near matches (one field differs)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from accelbench.report.bundle import Bundle
from accelbench.report.bundle_summary import noise_floor
from accelbench.report.cells import Rate
from accelbench.report.compare import Best, devices_of
from accelbench.report.compare import _rates as cell_rates
from accelbench.report.machines import Machine, group_machines
from accelbench.store.fingerprint import canonical_json, workload_id, workload_identity
from accelbench.store.record import Record

NEAR_SHOWN = 20  # near matches listed per field that differs (a page stays small)


@dataclass(frozen=True)
class Ranked:
    """One measured cell: the machine, the record and its rates (compare.Best), the bundle
    that carried it (its checksum) and the device class and count it ran on."""

    best: Best
    bundle: str
    device_class: str
    devices: int

    @property
    def record(self) -> Record:
        """The cell's record."""
        return self.best.record


@dataclass
class Site:
    """Everything the pages are written from."""

    bundles: list[Bundle]
    machines: list[Machine]
    baseline: Machine | None
    cells: dict[str, list[Ranked]] = field(default_factory=dict)  # workload id -> its cells
    identities: dict[str, dict[str, Any]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # workload id -> its table name
    bundle_of: dict[str, str] = field(default_factory=dict)  # record uid -> bundle checksum
    near: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # id -> (id, what)
    floors: dict[str, float | None] = field(default_factory=dict)  # machine key -> noise floor
    workload_ids: dict[int, str | None] = field(default_factory=dict)  # id(record) -> its id

    by_machine: dict[str, list[Ranked]] = field(default_factory=dict)  # machine key -> cells

    def machine_cells(self, machine: Machine) -> list[Ranked]:
        """Every measured cell of one machine, over all workloads."""
        return self.by_machine.get(machine.key, [])


def _finite(rate: Rate | None) -> bool:
    return rate is not None and math.isfinite(rate.value) and rate.value > 0


def rates(record: Record) -> tuple[Rate, Rate] | None:
    """(all devices, per device) tokens/s of an ok block or training cell as the report reads
    them (compare.py), or None where it measured nothing usable (no time, zero tokens)."""
    pair = cell_rates(record)
    return pair if pair is not None and all(_finite(r) for r in pair) else None


def device_class(environment: dict[str, Any]) -> str:
    """The kind of device (type and model name), whatever host or software: 'cuda NVIDIA H200'."""
    return f"{environment.get('device_type') or '?'} {environment.get('device_name') or '?'}"


def _loaded(bundles: list[Bundle]) -> tuple[list[tuple[str, Record]], dict[str, str]]:
    """(bundle name, record) of every measured bundle, a record in two bundles kept once."""
    seen: dict[str, str] = {}
    loaded = []
    for b in bundles:
        for r in b.records:
            key = r.uid or canonical_json([r.run_id, r.created_utc, r.kind, r.spec])
            if key not in seen:
                seen[key] = b.sha256
                loaded.append((b.name, r))
    return loaded, seen


def build_model(bundles: list[Bundle], baseline: Machine | None = None) -> Site:
    """The site's model from checked bundles (the reference bundles are kept apart)."""
    from accelbench.report.compare import workload

    measured = [b for b in bundles if b.contents == "measured"]
    loaded, bundle_of = _loaded(measured)
    machines = group_machines(loaded) if loaded else []
    site = Site(bundles, machines, baseline, bundle_of=bundle_of)
    for m in machines:
        for r in m.records:
            wid = site.workload_ids[id(r)] = workload_id(r.kind, r.spec)
            pair = rates(r) if wid is not None else None
            if pair is None:
                continue
            key = r.uid or canonical_json([r.run_id, r.created_utc, r.kind, r.spec])
            cell = Ranked(Best(m, r, *pair), bundle_of[key], device_class(r.environment),
                        devices_of(r))
            site.cells.setdefault(wid, []).append(cell)
            site.by_machine.setdefault(m.key, []).append(cell)
            if wid not in site.identities:
                site.identities[wid] = workload_identity(r.kind, r.spec) or {}
                site.names[wid] = f"{workload(r)} {r.setup.dtype}"
    site.near = near_matches(site.identities)
    site.floors = {m.key: (noise_floor(m) or {}).get("floor") for m in machines}
    return site


def _differs(a: Any, b: Any, name: str) -> str:
    """What differs in one field: 'layout: dp 1 vs 2' (a dict's differing keys), or 'x vs y'."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        return f"{name}: " + ", ".join(f"{k} {a.get(k)} vs {b.get(k)}" for k in keys[:4])
    return f"{name}: {a} vs {b}"


def near_matches(identities: dict[str, dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """Each workload's near matches: the workloads whose identity differs in exactly one field,
    with what differs (found by bucketing each identity less one field: linear in workloads)."""
    buckets: dict[tuple[str, str], list[str]] = {}
    for wid, ident in identities.items():
        for name in ident:
            rest = {k: v for k, v in ident.items() if k != name}
            buckets.setdefault((name, canonical_json(rest)), []).append(wid)
    near: dict[str, list[tuple[str, str]]] = {}
    for (name, _), ids in buckets.items():
        for a in ids:
            for b in ids[:NEAR_SHOWN + 1]:
                if a != b:
                    what = _differs(identities[a].get(name), identities[b].get(name), name)
                    near.setdefault(a, []).append((b, what))
    return near
