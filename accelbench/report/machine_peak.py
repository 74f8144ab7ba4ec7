"""One machine, one peak: the measured GEMM peak every MFU of a machine is divided by, decided
once across all its records (one database or several), and what was set aside.

A peak measured while other work used the machine reads low and makes every MFU divided by it
read high (two databases of one machine made within the hour carried bf16 peaks of 0.43 and
0.21 TFLOPS: 12% and 33% MFU for nearly the same workload). Per precision and thread count (a
one-thread rank's peak is not a two-thread process's), the report takes the best undisturbed
measured peak: the fastest among the peak records and cell peaks not flagged disturbed (a
disturbed one only where there is nothing else, and then it says so). Cells divided by another
peak get their MFU and HFU rescaled to it, their label saying from what; the Machines section
lists each set-aside peak. Datasheet peaks are never touched."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from accelbench.bench.peak_label import DISTURBED_PEAK, measured_label
from accelbench.config.record_kinds import carries, partial_metrics_dict
from accelbench.config.records.block import BLOCK_PHASES, BlockReading, PhaseFields
from accelbench.config.records.fields import PeakFields
from accelbench.config.records.peak import PeakMetrics
from accelbench.config.records.train import TrainMetrics
from accelbench.store.record import Record

_THREADS = re.compile(r"\d+ thread\(s\)")
_RECORD = re.compile(r"record (\d+)")
SAME = 0.02  # peaks within 2% of each other are one measurement's spread, not two peaks


@dataclass(frozen=True)
class Candidate:
    """One measured peak seen on a machine: its value, where it came from, whether disturbed."""

    flops_per_s: float
    label: str
    disturbed: bool
    source: str  # 'record 12 (quick.db)' or 'cells of quick.db'


@dataclass(frozen=True)
class Settled:
    """A precision's peak on one machine: the one used, the ones set aside."""

    precision: str
    threads: str
    used: Candidate
    set_aside: tuple[Candidate, ...]

    def text(self) -> str:
        """'fp32 0.201 TFLOPS (GEMM, 2 thread(s), record 1 of a.db); set aside: 0.111 (record 3
        of b.db, disturbed)'."""
        shown = (f"{self.precision} {self.used.flops_per_s / 1e12:.3g} TFLOPS (GEMM, "
                 f"{self.threads or '? thread(s)'}, {self.used.source})")
        if self.used.disturbed:
            shown += " (disturbed: its MFUs read high)"
        if self.set_aside:
            shown += "; set aside: " + ", ".join(
                f"{c.flops_per_s / 1e12:.3g} ({c.source}"
                f"{', disturbed' if c.disturbed else ', lower'})" for c in self.set_aside)
        return shown


def _key(precision: str | None, label: str) -> tuple[str, str]:
    threads = _THREADS.search(label)
    return str(precision), threads.group(0) if threads else ""


def _candidates(records: list[tuple[str, Record]]) -> dict[tuple[str, str], list[Candidate]]:
    """Every measured peak of a machine's records (peak records, and the peaks its cells were
    divided by), by precision and thread count."""
    disturbed_ids = {(source, r.id) for source, r in records
                     if carries(r.kind, PeakMetrics) and r.typed.disturbed}  # ids are per database
    found: dict[tuple[str, str], list[Candidate]] = {}
    for source, r in records:
        if carries(r.kind, PeakMetrics) and r.status == "ok":
            m = r.typed
            if m.peak_flops_per_s_per_device:
                label = measured_label(m, f", record {r.id}")
                found.setdefault(_key(r.setup.precision, label), []).append(
                    Candidate(m.peak_flops_per_s_per_device, label, bool(m.disturbed),
                              f"record {r.id} of {source}"))
            continue
        m = r.typed if carries(r.kind, PeakFields) else None
        if not isinstance(m, PeakFields) or not m.peak_flops_per_s_per_device:
            continue
        label = str(m.peak_label or "")
        if not label.startswith("measured"):
            continue
        named = _RECORD.search(label)
        flagged = DISTURBED_PEAK in label or (
            named is not None and (source, int(named.group(1))) in disturbed_ids)
        found.setdefault(_key(m.peak_precision, label), []).append(
            Candidate(m.peak_flops_per_s_per_device, label, flagged, f"cells of {source}"))
    return found


def settle(records: list[tuple[str, Record]]) -> list[Settled]:
    """Each precision's one peak on this machine (see the module), and those set aside."""
    settled = []
    for (precision, threads), found in _candidates(records).items():
        quiet = [c for c in found if not c.disturbed] or found
        used = max(quiet, key=lambda c: c.flops_per_s)
        aside: dict[float, Candidate] = {}
        for c in found:
            if abs(c.flops_per_s - used.flops_per_s) > SAME * used.flops_per_s:
                aside.setdefault(round(c.flops_per_s, -6), c)
        settled.append(Settled(precision, threads, used, tuple(aside.values())))
    return settled


def rescaled(record: Record, peaks: list[Settled]) -> Record:
    """The cell with its MFU and HFU over the machine's settled peak (unchanged where it was
    divided by it, or by a datasheet's)."""
    m = record.typed if carries(record.kind, PeakFields) else None
    if not isinstance(m, PeakFields) or not m.peak_flops_per_s_per_device:
        return record
    label = str(m.peak_label or "")
    key = _key(m.peak_precision, label)
    chosen = next((p for p in peaks if (p.precision, p.threads) == key), None)
    if chosen is None or not label.startswith("measured"):
        return record
    factor = m.peak_flops_per_s_per_device / chosen.used.flops_per_s
    if abs(factor - 1) <= SAME:
        return record
    note = (f"{chosen.used.label}; the report's one peak of this machine, the cell's "
            f"{m.peak_flops_per_s_per_device / 1e12:.3g} TFLOPS set aside")
    values = partial_metrics_dict(PeakFields, peak_flops_per_s_per_device=chosen.used.flops_per_s,
                                  peak_label=note)
    if isinstance(m, BlockReading):
        for phase in BLOCK_PHASES:
            mfu = m.phase(phase).mfu
            values |= {f"{phase}_{k}": v for k, v in partial_metrics_dict(
                PhaseFields, mfu=None if mfu is None else mfu * factor).items()}
    else:
        values |= partial_metrics_dict(
            TrainMetrics, mfu=None if m.mfu is None else m.mfu * factor,
            hfu=None if m.hfu is None else m.hfu * factor)
    return replace(record, metrics={**record.metrics, **values})
