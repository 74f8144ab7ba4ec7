"""The site's pages, as HTML text: the index of machines, a ranking per workload fingerprint, a
page per machine and the paper's published figures apart. Page names are made here from
hashes the site computes; nothing read from a bundle names a file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelbench.report.cells import Rate
from accelbench.report.evidence import speedup_text
from accelbench.report.machines import Machine, short_version
from accelbench.report.site.html import Cell, esc, link, page, paragraph, table
from accelbench.report.site.marks import Peers, cell_marks, marks_html, peer_groups, record_marks
from accelbench.report.site.site_model import Ranked, Site
from accelbench.store.fingerprint import canonical_json

INDEX, FIGURES, REFERENCE = "index.html", "figures.html", "reference.html"
NAV = ((INDEX, "machines"), (FIGURES, "figures"), (REFERENCE, "published figures (reference)"))


def machine_page_name(machine: Machine) -> str:
    """machine-<fingerprint prefix>.html."""
    return f"machine-{machine.key[:16]}.html"


def workload_page_name(wid: str) -> str:
    """workload-<workload id>.html (the id computed from the spec: 12 hex digits)."""
    return f"workload-{wid}.html"


def safe(fn: Callable[[], str], default: str = "-") -> str:
    """A figure's text, or `default` where an odd (but valid) record cannot give one."""
    try:
        return fn()
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError, IndexError):
        return default


def rate_cell(rate: Rate | None, fmt: str = ",.0f") -> Cell:
    """A rate with its spread, sorting by its value."""
    return Cell("-") if rate is None else Cell(rate.text(fmt), rate.value)


def _index_row(site: Site, m: Machine, floor: float | None) -> list[Cell | str]:
    env = m.environment
    dates = sorted(r.created_utc for r in m.records)
    measured = len(site.machine_cells(m))
    return [Cell(f"M{m.index}", m.index), Cell(markup=link(machine_page_name(m), m.name)),
            str(env.get("device_name") or env.get("device_type") or "?"),
            Cell(str(env.get("device_count") or 1), float(env.get("device_count") or 1)),
            f"torch {short_version(env.get('torch'))}, {env.get('cuda_runtime') or 'no CUDA'}",
            Cell(dates[-1][:10] if dates else "-"), Cell(str(len(m.records)), len(m.records)),
            Cell(str(measured), measured),
            Cell("-" if floor is None else f"±{100 * floor:.1f}%", floor),
            ", ".join(m.sources)[:200]]


def index_page(site: Site) -> str:
    """Every machine: device, count, software, date, records, noise floor, its bundles."""
    noise = site.floors
    rows = [_index_row(site, m, noise[m.key]) for m in site.machines]
    header = ("#", "machine", "device", "devices", "software", "latest (UTC)", "records",
              "ranked cells", "noise floor", "bundles")
    workloads = [[Cell(markup=link(workload_page_name(w), site.names[w])),
                  Cell(str(len(site.cells[w])), len(site.cells[w])),
                  Cell(str(len({c.best.machine.key for c in site.cells[w]})),
                       len({c.best.machine.key for c in site.cells[w]})), w]
                 for w in sorted(site.cells, key=lambda w: site.names[w])]
    body = (paragraph(f"{len(site.bundles)} bundle(s), {len(site.machines)} machine(s), "
                      f"{len(site.cells)} workload(s) measured. Machines are compared only on "
                      "identical workloads (the same workload fingerprint).")
            + "<h2>Machines</h2>" + table("machines", header, rows,
                                          "noise floor: the machine's latest A/A check "
                                          "(accelbench noise); '-': none measured.")
            + "<h2>Workloads</h2>" + table("workloads", ("workload", "cells", "machines",
                                                         "fingerprint"), workloads))
    return page("accelbench: machines compared", body, NAV)


def _verdict(site: Site, cell: Ranked, base: Ranked | None) -> str:
    if base is None:
        return "baseline did not run it"
    if base is cell:
        return "baseline"
    ratio = cell.best.total.value / base.best.total.value
    return safe(lambda: speedup_text(base.record, cell.record, ratio), f"{ratio:.2f}x")


def best_per_machine(cells: list[Ranked]) -> list[Ranked]:
    """Each machine's fastest cell of a workload (most tokens/s, all devices), fastest first."""
    best: dict[str, Ranked] = {}
    for c in cells:
        key = c.best.machine.key
        if key not in best or c.best.total.value > best[key].best.total.value:
            best[key] = c
    return sorted(best.values(), key=lambda c: -c.best.total.value)


def _rank_row(site: Site, n: int, c: Ranked, base: Ranked | None, peers: Peers,
              floor: float | None) -> list[Cell | str]:
    m = c.best.machine
    mfu = safe(lambda: c.best.mfu.text(".2%") if c.best.mfu else "-")
    return [Cell(str(n), n), Cell(markup=link(machine_page_name(m), f"M{m.index} {m.name}")),
            f"{c.device_class} x{c.devices}", rate_cell(c.best.total),
            rate_cell(c.best.per_device), Cell(mfu),
            _verdict(site, c, base), Cell(markup=marks_html(cell_marks(c, peers, floor))),
            c.bundle[:12]]


def workload_page(site: Site, wid: str) -> str:
    """The workload's ranking: every machine that ran it, its best cell, spread, MFU, the
    verdict against the baseline, trust marks; its identity; near matches listed apart."""
    cells = site.cells[wid]
    ranked = best_per_machine(cells)
    base = next((c for c in ranked if site.baseline and c.best.machine.key == site.baseline.key),
                None)
    noise = site.floors
    groups = peer_groups(cells)
    rows = [_rank_row(site, n, c, base, groups[(c.device_class, c.devices)],
                      noise[c.best.machine.key]) for n, c in enumerate(ranked, 1)]
    header = ("rank", "machine", "devices", "tokens/s (all devices)", "tokens/s per device",
              "MFU", f"vs baseline M{site.baseline.index}" if site.baseline else "vs baseline",
              "trust", "bundle")
    ident = "".join(f"<tr><th>{esc(k)}</th><td>{esc(canonical_json(v))}</td></tr>"
                    for k, v in site.identities[wid].items())
    near = [[Cell(markup=link(workload_page_name(o), site.names.get(o, o))), what]
            for o, what in site.near.get(wid, [])]
    body = (paragraph(f"Workload fingerprint {wid}: only cells of exactly this workload are "
                      "ranked here. (low-high): the 95% interval of the median over the cell's "
                      "trials where it ran 6 or more, else its slowest and fastest step.")
            + table("ranking", header, rows, "vs baseline: the ratio of median throughputs "
                    "with its 95% interval from both cells' trials (report/evidence.py).")
            + f"<h2>What this workload is</h2><table>{ident}</table>"
            + "<h2>Near matches (not compared)</h2>"
            + (table("near", ("workload", "what differs"), near) if near
               else paragraph("No workload here differs from this one in a single field.")))
    return page(site.names[wid], body, NAV)


def _record_row(site: Site, r: Any) -> list[Cell | str]:
    from accelbench.report.compare import workload
    from accelbench.report.table import key_figure

    wid = site.workload_ids.get(id(r))
    name = safe(lambda: workload(r) or "-")
    where = (Cell(markup=link(workload_page_name(wid), name)) if wid in site.cells
             else Cell(name))
    return [Cell(r.created_utc[:16].replace("T", " ")), r.kind, where,
            safe(lambda: str(r.setup.dtype or "-")), r.status, safe(lambda: key_figure(r)),
            Cell(markup=marks_html(record_marks(r))), r.reason[:300]]


def machine_page(site: Site, m: Machine) -> str:
    """One machine: its environment, peaks with their provenance, noise floor, every record."""
    from accelbench.report.bundle_summary import noise_floor, peaks

    env = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>"
                  for k, v in m.environment.items())
    peak_rows = [[str(p["precision"]), Cell(f"{p['flops_per_s_per_device'] / 1e12:.4g}",
                                            p["flops_per_s_per_device"]), p["source"]]
                 for p in safe_list(lambda: peaks(m))]
    floor = noise_floor(m)
    floor_text = ("none measured (accelbench noise)" if not floor or floor["floor"] is None
                  else f"±{100 * floor['floor']:.1f}% ({floor['configuration']}, "
                       f"{floor['created_utc'][:16]})")
    rows = [_record_row(site, r) for r in m.records]
    body = (f"<h2>Environment</h2><table>{env}</table>" + paragraph(f"Noise floor: {floor_text}")
            + "<h2>Peaks its MFU divides by</h2>"
            + table("peaks", ("precision", "TFLOPS per device", "source"), peak_rows)
            + "<h2>Records</h2>"
            + table("records", ("created (UTC)", "kind", "workload", "precision", "status",
                                "key figure", "trust", "reason"), rows))
    return page(f"M{m.index} {m.name}", body, NAV)


def safe_list(fn: Callable[[], list]) -> list:
    """A list, or none where an odd record cannot give it."""
    try:
        return fn()
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError, IndexError):
        return []


def reference_page(site: Site) -> str:
    """The paper's published figures, from reference bundles only, labelled as such."""
    rows = [[e["figure"], e["system"], e["quantity"], e["setup"],
             Cell(f"{e['value']:.3g}", e["value"]),
             "-" if e["low"] is None else f"{e['low']:.3g}-{e['high']}", e["source"],
             e["note"], Cell(markup=marks_html(_reference_mark()))]
            for b in site.bundles if b.contents == "reference" for e in b.published]
    body = paragraph("Published figures, carried by reference bundles ('accelbench publish "
                     "--reference'): stated by the paper, not measured here, and never ranked "
                     "with measurements.")
    body += (table("reference", ("figure", "system", "quantity", "setup", "value", "range",
                                 "source", "note", "trust"), rows) if rows
             else paragraph("No reference bundle was given."))
    return page("Published figures (reference)", body, NAV)


def no_figures_page() -> str:
    """The figures page of a site built with --no-figures."""
    return page("Figures across machines", paragraph("Built with --no-figures: no figures were "
                                                     "drawn; the workload pages rank every "
                                                     "machine."), NAV)


def _reference_mark() -> list:
    from accelbench.report.site.marks import REFERENCE, Mark

    return [Mark(REFERENCE, "stated by the paper; not measured")]
