"""`accelbench check`: what of accelbench works on this device, one feature at a time.

Each probe is a small function of a `CheckSettings`; it returns what it found (a line of text
and a few values), raises `NotHere` when the feature does not exist on this device (with the
reason), and any other exception is that feature failing. `run_check` isolates every probe, so
a missing or broken feature is one line of the matrix, never a crash; the matrix is one
'check' outcome (CheckMetrics, config/records/). Sizes are small: seconds on a CPU. The probes'
contract is in check_probe.py, the probes in device_probes.py, kernel_probes.py and
group_probes.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from accelbench.bench.check_probe import CheckSettings, NotHere, Probe, first_line
from accelbench.bench.device_probes import probe_device, probe_energy, probe_memory, probe_timing
from accelbench.bench.group_probes import probe_collective, probe_fsdp2
from accelbench.bench.kernel_probes import (
    MATMUL_PRECISIONS,
    SDPA_BACKENDS,
    probe_attention,
    probe_compile,
    probe_fp8,
    probe_fused_adamw,
    probe_matmul,
    probe_two_four,
)
from accelbench.bench.outcome import Outcome, Progress
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.check import CheckMetrics

KIND = "check"
OK, UNAVAILABLE, FAILED = "ok", "unavailable", "failed"
STATUSES = (OK, UNAVAILABLE, FAILED)


def settings_for(device: torch.device, compile_backend: str = "inductor") -> CheckSettings:
    """Sizes for this device: a GPU gets GEMMs and attention big enough to reach its units."""
    if device.type == "cpu":
        return CheckSettings(device, compile_backend=compile_backend)
    return CheckSettings(device, matmul_n=4096, matmul_repeats=10,
                         attention_shape=(8, 25, 1024, 64), compile_backend=compile_backend)


@dataclass(frozen=True)
class Feature:
    """One line of the matrix."""

    name: str
    status: str  # ok, unavailable, failed
    detail: str  # what was found, or why not
    seconds: float
    values: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As the record stores it."""
        return {"name": self.name, "status": self.status, "detail": self.detail,
                "seconds": self.seconds, "values": self.values}


PROBES: tuple[tuple[str, Probe], ...] = (
    ("device", probe_device),
    ("memory", probe_memory),
    ("timing", probe_timing),
    *((f"matmul_{p}", probe_matmul(p)) for p in MATMUL_PRECISIONS),
    *((f"attention_{b}", probe_attention(b)) for b in SDPA_BACKENDS),
    ("compile", probe_compile),
    ("fused_adamw", probe_fused_adamw),
    ("fp8", probe_fp8),
    ("sparse_2to4", probe_two_four),
    ("energy", probe_energy),
    ("collective", probe_collective),
    ("fsdp2", probe_fsdp2),
)
PROBE_NAMES = tuple(name for name, _ in PROBES)


def run_probe(name: str, probe: Probe, settings: CheckSettings) -> Feature:
    """One probe, isolated: its result, 'unavailable' with the reason, or 'failed' with the
    error; never raises (but for KeyboardInterrupt and SystemExit)."""
    start = time.perf_counter()
    try:
        detail, values = probe(settings)
        status = OK
    except NotHere as why:
        detail, values, status = str(why), {}, UNAVAILABLE
    except Exception as err:  # noqa: BLE001 - any failure of a feature is that feature's line
        detail, values, status = first_line(err), {}, FAILED
    return Feature(name, status, detail, round(time.perf_counter() - start, 3), values)


def run_check(settings: CheckSettings, probes: tuple[tuple[str, Probe], ...] | None = None,
              progress: Progress | None = None) -> Outcome:
    """Every probe (default: PROBES) in order, into one 'check' outcome (status ok: the matrix
    was made)."""
    probes = PROBES if probes is None else probes
    start = time.perf_counter()
    features = []
    for i, (name, probe) in enumerate(probes):
        if progress:
            progress(i, len(probes), name)
        features.append(run_probe(name, probe, settings))
    return check_outcome(settings, features, time.perf_counter() - start)


def check_outcome(settings: CheckSettings, features: list[Feature], seconds: float) -> Outcome:
    """The record's outcome: the spec (device, sizes), the features, the counts."""
    counts = {status: sum(f.status == status for f in features) for status in STATUSES}
    metrics = CheckMetrics(features=[f.to_dict() for f in features], features_ok=counts[OK],
                           features_unavailable=counts[UNAVAILABLE],
                           features_failed=counts[FAILED], check_time_s=round(seconds, 3))
    failed = [f.name for f in features if f.status == FAILED]
    spec = {"device": str(settings.device), "matmul_n": settings.matmul_n,
            "attention_shape": list(settings.attention_shape),
            "compile_backend": settings.compile_backend,
            "probes": [f.name for f in features]}
    return Outcome(KIND, OK, spec, metrics_dict(metrics),
                   reason=f"failed: {', '.join(failed)}" if failed else "")
