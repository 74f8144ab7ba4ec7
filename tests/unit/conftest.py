"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest

from accelbench.bench import gemm_peak as peak_mod
from accelbench.config.records.peak import PeakMetrics


@pytest.fixture
def quick_peak(monkeypatch):
    """A stand-in for the CPU's GEMM peak measurement (~8 s of CPU a sweep, 2 cores), for tests
    of something else run through the command line, where no peak can be given: the peak is
    still decided and recorded as a sweep does, only not timed. The measurement itself is
    tested for real (test_train_bench, test_block_sweep, test_hardware)."""
    def measure(device, dtype, tf32, threads=None, attempts=None):
        metrics = PeakMetrics(1e11, 1e11, 1e11, 1, 64, "nn", threads or 1)
        return metrics, [1e11]

    monkeypatch.setattr(peak_mod, "measure_peak", measure)
