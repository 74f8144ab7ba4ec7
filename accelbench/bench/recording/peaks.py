"""One measured peak per machine: the store's answer to a sweep about to measure a GEMM peak.

A device with no datasheet peak (a CPU) is measured once per machine fingerprint (the device,
its software, the host and the torch threads: store/fingerprint.py) and precision; every later
sweep on that machine divides by the same stored peak, so MFUs of one machine are comparable
across sweeps. `--remeasure-peak` leaves the lookup out and measures again; a changed
fingerprint finds nothing and measures anew. A peak measured while the machine was disturbed
(PeakMetrics.disturbed) is never reused: the next sweep measures again.
"""

from __future__ import annotations

from dataclasses import fields

from accelbench.bench.gemm_peak import PEAK_KIND, PeakLookup, SweepPeak, measured_label
from accelbench.config.record_kinds import read_spec
from accelbench.config.records.peak import PeakMetrics, PeakRecordSpec
from accelbench.store.fingerprint import machine_fingerprint
from accelbench.store.record import Record
from accelbench.store.store import ResultStore


def peak_identity(spec: PeakRecordSpec) -> tuple[object, ...]:
    """The peak spec's fields that must match: what was measured (the device string is not:
    the machine fingerprint names the device)."""
    return spec.dtype, spec.precision, spec.tf32, spec.threads


def _matches(record: Record, asked: PeakRecordSpec, machine: str) -> bool:
    return machine_fingerprint(record.environment) == machine and \
        peak_identity(record.setup) == peak_identity(asked)


def _as_peak(record: Record) -> SweepPeak:
    """A stored peak record as the sweep's peak, its label naming the record it came from."""
    names = {f.name for f in fields(PeakMetrics)}
    metrics = PeakMetrics(**{k: v for k, v in record.metrics.items() if k in names})
    when = record.created_utc[:10]
    return SweepPeak(record.setup.dtype, metrics.peak_flops_per_s_per_device,
                     record.setup.precision,
                     measured_label(metrics, f", record {record.id} of {when}, reused"))


def machine_peaks(store: ResultStore, environment: dict) -> PeakLookup:
    """Look a peak spec up among this machine's stored peak records (the latest wins)."""
    machine = machine_fingerprint(environment)
    cache: dict[str, SweepPeak | None] = {}

    def lookup(spec: dict) -> SweepPeak | None:
        asked = read_spec(PEAK_KIND, spec)
        key = repr(list(peak_identity(asked)))
        if key not in cache:
            found = [r for r in store.query(kind=PEAK_KIND, status="ok")
                     if _matches(r, asked, machine) and not r.typed.disturbed]
            latest = max(found, key=lambda r: r.id or 0, default=None)
            cache[key] = None if latest is None else _as_peak(latest)
        return cache[key]

    return lookup
