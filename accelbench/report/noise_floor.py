"""The noise floor every comparison states: each machine's latest A/A check (a `noise` record of
`accelbench noise`) and the sentence the comparison section and the bundle summary state beside
their ratios (docs/metrics.md, "The noise floor"). The noise workload's own table and section
are in workloads/noise/report.py."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.config.record_kinds import carries
from accelbench.config.records.noise import NoiseMetrics
from accelbench.report.machines import Machine
from accelbench.report.trial_display import claim_text
from accelbench.store.record import Record

COMMAND = "`accelbench noise`"


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
    s = record.setup
    return (f"{s.model_name} seq {s.seq_len} mb {s.micro_batch} "
            f"{s.dtype}")


def latest_noise(machine: Machine) -> Record | None:
    """The machine's latest ok noise check, or None."""
    checks = [r for r in machine.records if carries(r.kind, NoiseMetrics) and r.status == "ok"]
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
