"""Table IV of the study (GenSLM): codons/s, MFU and memory of the genome language model's
cells (kind 'train', benchmark genslm), and the longest sequence that fits, from the search's
'seq-search' probes and the measured cell's spec.seq_search."""

from __future__ import annotations

from accelbench.config.record_kinds import carries
from accelbench.config.records.seq_search import SeqSearchMetrics
from accelbench.report.cells import is_training, latest, pct, status_text, train_rate
from accelbench.report.content import Finding, Section, Table
from accelbench.report.findings import prefixed
from accelbench.report.machines import Machine
from accelbench.report.paper import cite
from accelbench.report.training import (
    CELL_HEADER,
    cell_columns,
    cells_method,
    measure_columns,
    measure_header,
    seq_figure,
    training_cells,
)
from accelbench.store.record import Record

SOURCE = ("kind 'train' records with spec.benchmark 'genslm' (throughput in codons/s: "
          "tokens_per_s_per_device, spec.token_unit codon), kind 'seq-search' probes and the "
          f"measured cell's spec.seq_search; the study's table IV ({cite('table IV')})")
SEARCH_FIELDS = ("model_name", "dtype", "micro_batch", "gas", "recompute")


def _search_key(machine: Machine, r: Record) -> tuple:
    return (machine.index, machine.label, *(str(getattr(r.setup, f)) for f in SEARCH_FIELDS))


def _searches(machines: list[Machine]) -> dict[tuple, dict]:
    """Per machine and searched cell: probes that fit and not, and the measured cell."""
    found: dict[tuple, dict] = {}
    for m in machines:
        for r in m.records:
            if carries(r.kind, SeqSearchMetrics) and (r.setup.benchmark or "genslm") == "genslm":
                entry = found.setdefault(_search_key(m, r), {"fit": [], "miss": [], "cell": None})
                entry["fit" if r.status == "ok" else "miss"].append(r)
        cells = [r for r in m.records if is_training(r) and r.setup.seq_search is not None
                 and r.setup.benchmark == "genslm"]
        for key, r in latest(cells, lambda r, m=m: _search_key(m, r)).items():
            found.setdefault(key, {"fit": [], "miss": []})["cell"] = r
    return found


def _search_row(key: tuple, entry: dict) -> tuple[str, ...]:
    cell = entry["cell"]
    search = cell.setup.seq_search if cell is not None else {}
    fits = [r.setup.seq_len for r in entry["fit"]]
    misses = [r.setup.seq_len for r in entry["miss"]]
    longest = search.get("largest", max(fits, default=0))
    first_miss = min((s for s in misses if s > longest), default=None)
    method = search.get("method") or next((r.setup.method for r in entry["fit"]
                                           + entry["miss"]), "-")
    rate = train_rate(cell) if cell is not None and cell.status == "ok" else None
    measured = rate.text() if rate else (cell.status if cell is not None else "not measured")
    return (key[1], key[2], key[3], key[4], key[6], str(longest or "none fits"),
            str(first_miss or "-"), str(method), str(search.get("limit_reason", "-")),
            measured)


def _cell_findings(cells: list[tuple[Machine, Record]], many: bool) -> list[Finding]:
    """Per model (and machine): its best measured codons/s, or that it does not fit."""
    by_model: dict[tuple, list[Record]] = {}
    for m, r in cells:
        if r.setup.seq_search is None:  # the longest-sequence cells have their own line
            by_model.setdefault((m.index, str(r.setup.model_name)), []).append(r)
    phrases: dict[int, list[str]] = {}
    for (index, model), records in by_model.items():
        ok = [(rate, r) for r in records if r.status == "ok" and (rate := train_rate(r))]
        if ok:
            rate, r = max(ok, key=lambda item: item[0].value)
            text = (f"{model} at seq {r.setup.seq_len} {r.setup.dtype}: "
                    f"{rate.text()} codons/s a device, {pct(r.typed.mfu, 1)} MFU")
        else:
            text = f"{model}: {status_text(records[0])}"
        phrases.setdefault(index, []).append(text)
    return [Finding(prefixed(f"M{i}", "GenSLM: " + "; ".join(p), many), "genslm")
            for i, p in phrases.items()]


def _search_findings(searches: dict[tuple, dict], many: bool) -> list[Finding]:
    """Per searched cell: the longest sequence that fits one device, and how it was decided."""
    found = []
    for key, entry in searches.items():
        row = _search_row(key, entry)
        text = (f"Longest GenSLM sequence on one device ({key[2]}, {key[3]}): {row[5]} "
                f"(decided by {row[7]}), {row[9]} codons/s a device there")
        found.append(Finding(prefixed(key[1], text, many), "genslm"))
    return found


def genslm_section(machines: list[Machine]) -> Section:
    """Table IV: every GenSLM cell, the longest sequence found, and codons/s against length."""
    title = "GenSLM (table IV)"
    cells = training_cells(machines, "genslm")
    searches = _searches(machines)
    if not cells and not searches:
        return Section("genslm", title, SOURCE, ("No GenSLM records.",))
    tables = [Table("GenSLM cells", CELL_HEADER + measure_header("codon"),
                    tuple(cell_columns(m, r) + measure_columns(r) for m, r in cells),
                    "Every GenSLM cell: codons/s per device with its interval, MFU, memory.",
                    cells_method([r for _, r in cells]))]
    if searches:
        tables.append(Table(
            "Longest sequence that fits", ("machine", "model", "precision", "micro-batch",
                                           "recompute", "longest seq", "first that does not fit",
                                           "decided by", "limited by",
                                           "codons/s per device at the longest"),
            tuple(_search_row(k, e) for k, e in searches.items()),
            "The longest sequence one device holds, and its measured codons/s.",
            "From the search's probes (kind seq-search: ok = fits) and the measured cell's "
            "spec.seq_search; 'estimate' is the memory estimate against the budget (a CPU, or "
            "--mem-limit), 'trial' two real steps on the device."))
    figures = (seq_figure("table4_genslm_codons", "GenSLM throughput against sequence length",
                          cells, "codon",
                          "The study's table IV as a figure: the best GenSLM cell of each "
                          "machine, model and precision at each length."),) if cells else ()
    many = len(machines) > 1
    found = (*_cell_findings(cells, many), *_search_findings(searches, many))
    return Section("genslm", title, SOURCE, (), figures, tuple(tables), found)
