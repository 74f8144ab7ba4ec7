"""An undisturbed GEMM peak stored in a test's database before a command the test starts uses
it: the command divides by that stored peak (bench/recording/peaks.py reuses this machine's)
instead of measuring one, ~7 s of CPU in fp32 on 2 cores, where the peak is not what the test
checks. The figure is given, as the in-process tests' SweepPeak(..., "given"). It matches the
command's machine fingerprint where the command runs as many torch threads as this process
(under scripts/test's two test processes: one, tests/conftest.py); elsewhere the command
measures its own peak as before."""

from __future__ import annotations

from pathlib import Path

import torch

from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.peak import PeakMetrics
from accelbench.hardware.environment import environment
from accelbench.store.record import Record
from accelbench.store.store import ResultStore

GIVEN_FLOPS_PER_S = 1e11


def seed_peak(db: Path, dtype: str = "fp32", threads: int = 1) -> None:
    """Store an undisturbed `dtype` peak of this machine for `threads` threads in db."""
    flops = GIVEN_FLOPS_PER_S
    metrics = PeakMetrics(flops, flops, flops, repetitions=1, gemm_n=64, gemm_layout="nt",
                          threads=threads, disturbed=False, attempts=1)
    spec = {"workload": "peak", "device": "cpu", "dtype": dtype, "precision": dtype,
            "tf32": False, "threads": threads}
    store = ResultStore(db)
    try:
        store.add(Record(kind="peak", status="ok", spec=spec,
                         environment=environment(torch.device("cpu")),
                         metrics=metrics_dict(metrics)))
    finally:
        store.close()
