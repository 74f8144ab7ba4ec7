"""The report's opening: where its records come from, and the machines found in them."""

from __future__ import annotations

import re
from collections import Counter

from accelbench.config.record_kinds import METRICS_BY_KIND, carries
from accelbench.config.records.check import CheckMetrics
from accelbench.config.records.fields import PeakFields
from accelbench.report.cells import tflops
from accelbench.report.content import Section, Table
from accelbench.report.feature_rows import CHECK_HEADER, check_rows, check_summary
from accelbench.report.machines import Machine
from accelbench.report.paper import PAPER


def _kinds(machine: Machine) -> str:
    counts = Counter(r.kind for r in machine.records)
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))


def _peaks(machine: Machine) -> str:
    """Each precision's dense peak and where it came from: a measured one settled to one per
    precision and thread count (report/machine_peak.py: the best undisturbed, what was set aside, a
    disturbed one flagged), a datasheet's as its cells name it."""
    measured = [p.text() for p in machine.peaks]
    seen: dict[tuple[str, str], dict[float | None, str]] = {}
    for r in machine.records:
        m = r.typed if r.kind in METRICS_BY_KIND else None
        if not isinstance(m, PeakFields):  # a peak, profile, ... record: no cell's peak
            continue
        if m.peak_precision and m.peak_label and not m.peak_label.startswith("measured"):
            threads = _THREADS.search(m.peak_label)
            key = (m.peak_precision, threads.group(0) if threads else "")
            seen.setdefault(key, {}).setdefault(m.peak_flops_per_s_per_device, m.peak_label)
    sheet = [_peak_text(precision, peaks) for (precision, _), peaks in seen.items()]
    return "; ".join(measured + sheet) or "-"


_THREADS = re.compile(r"\d+ thread\(s\)")


def _peak_text(precision: str, peaks: dict[float | None, str]) -> str:
    """'fp32 0.098 TFLOPS (label)', or the several a precision's cells were divided by."""
    if len(peaks) == 1:
        (value, label), = peaks.items()
        return f"{precision} {tflops(value)} TFLOPS ({label})"
    values = sorted(v for v in peaks if v is not None)
    spread = f"{tflops(values[0])}-{tflops(values[-1])}" if values else "-"
    return (f"{precision}: {len(peaks)} different peaks, {spread} TFLOPS: MFUs of its sweeps "
            "are divided by different figures and do not compare (a machine now keeps one "
            "measured peak: docs/metrics.md)")


def machines_section(machines: list[Machine], base: Machine) -> Section:
    """The machines table, the key of every M1, M2 ... of the report: name, datasheet row,
    database, records, and each precision's dense peak (a measured one flagged disturbed)."""
    rows = tuple((f"M{m.index}" + (" (baseline)" if m.index == base.index and len(machines) > 1
                                   else ""), m.name,
                  str(m.environment.get("device_spec_key") or "none"),
                  str(m.environment.get("host")), ", ".join(m.sources), _kinds(m), _peaks(m))
                 for m in machines)
    table = Table("Machines", ("#", "name", "hardware table row", "host", "database",
                               "records", "dense peaks"), rows,
                  "The key of every M1, M2 ... in this report, and the peak each MFU divides "
                  "by; 'none': no datasheet, so the peaks were measured.",
                  "A machine is one fingerprint of the records' environment: device type, name "
                  "and count, torch version, CPU and host. The hardware table row (accelbench "
                  "hw) gives the datasheet peaks and the planner's predictions.")
    return Section("machines", "Machines", "the environment of every record",
                   (f"Regenerates the tables and figures of {PAPER} and compares the machines "
                    "that made them.", *peak_notes(machines)), (),
                   (table, *check_tables(machines)))


def peak_notes(machines: list[Machine]) -> list[str]:
    """A line per machine whose MFUs rest on a disturbed peak, or whose peaks disagreed."""
    notes = []
    for m in machines:
        for p in m.peaks:
            if p.used.disturbed:
                notes.append(f"M{m.index}'s {p.precision} MFUs rest on a peak measured while "
                             "other work used the machine: it reads low, so they read high.")
            if p.set_aside:
                notes.append(f"M{m.index}'s {p.precision} peaks disagreed: every MFU uses the "
                             f"best undisturbed one, {p.used.flops_per_s / 1e12:.3g} TFLOPS; "
                             "set aside: " + ", ".join(
                                 f"{c.flops_per_s / 1e12:.3g} ({c.source}"
                                 f"{', disturbed' if c.disturbed else ''})"
                                 for c in p.set_aside) + ".")
    return notes


def check_tables(machines: list[Machine]) -> list[Table]:
    """Each machine's newest feature matrix (accelbench check), where it has one."""
    tables = []
    for m in machines:
        checks = [r for r in m.records if carries(r.kind, CheckMetrics)]
        if not checks:
            continue
        newest = max(checks, key=lambda r: r.created_utc)
        tables.append(Table(f"Feature check, M{m.index}", CHECK_HEADER,
                            tuple(check_rows(newest)),
                            f"accelbench check on M{m.index} ({check_summary(newest)}, "
                            f"{newest.created_utc}): ok, unavailable (with why) or failed "
                            "(with the error) for every feature accelbench uses."))
    return tables
