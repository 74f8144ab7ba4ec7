"""accelbench calibrate's collectives under torchrun (launched by the command: 2 gloo ranks on
the CPU): every collective at every message size, sizes and bus bandwidth by the nccl-tests
convention, the slowest rank's times, stored and read back as the profile's curves; SIGTERM
while the ranks run stops them and keeps the points measured before."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import pytest

from accelbench.analytics.kernels import COLLECTIVE_OPS, bus_factor
from accelbench.parallel.procs import descendants
from accelbench.report.stored_profile import load_profile
from accelbench.store.store import ResultStore
from tests.unit.cli_run import run_main

# one 2-rank launch at a time, beside the "dist" group's launches (tests/conftest.py)
pytestmark = [pytest.mark.dist, pytest.mark.xdist_group("dist-2ranks")]

SIZES = (4096, 262144)


def test_collectives_on_two_gloo_ranks(monkeypatch, capsys, tmp_path):
    db = tmp_path / "p.db"
    code, out, err = run_main(
        monkeypatch, capsys, "calibrate", "--device", "cpu", "--ops", "collective",
        "--nproc", "2", "--message-sizes", "4KiB,256KiB", "--repeats", "4", "--warmup", "1",
        "--timeout", "240", "--db", str(db))
    assert code == 0, err
    [record] = ResultStore(db).query(kind="profile")
    m = record.metrics
    assert record.status == "ok" and not record.reason, record.reason
    assert (m["collective_ranks"], m["collective_backend"], m["collective_reason"]) == (
        2, "gloo", None)
    points = m["points"]
    assert sorted((p["shape"]["collective"], p["size"]) for p in points) == sorted(
        (op, float(size)) for op in COLLECTIVE_OPS for size in SIZES)
    for p in points:
        op = p["shape"]["collective"]
        assert p["work"] == p["size"] * bus_factor(op, 2)  # busbw = algbw x factor
        assert p["samples"] == 4 and 0 < p["time_s_min"] <= p["time_s_median"] <= p["time_s_max"]
        assert p["rate_per_s"] == pytest.approx(p["work"] / p["time_s_median"])
    profile = load_profile(ResultStore(db, write=False))
    for op in COLLECTIVE_OPS:
        small = next(p for p in points if p["shape"]["collective"] == op and p["size"] == 4096)
        big = next(p for p in points if p["shape"]["collective"] == op and p["size"] == 262144)
        latency = min(small["time_s_median"], big["time_s_median"])
        assert profile.latency_s[op] == latency == m["collective_latency_s_by_op"][op]
        assert profile.collective_time_s(op, 262144) == pytest.approx(big["time_s_median"])
        assert profile.collective_time_s(op, 16) == latency  # below the sizes: the latency
        assert profile.bus_bytes_per_s(op, 262144) == pytest.approx(big["rate_per_s"])
    assert "collective:all_reduce" in out


def _term_when_launched(folder: Path, started: float) -> None:
    """SIGTERM to this process once a calibration's ranks exist (torchrun has made their log
    files): the launcher then supervises them under its signal handlers, and the collectives
    (64 MiB, 100 repeats each) cannot have finished, however slow or loaded the machine."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        jobs = [p.parent for p in folder.glob("accelbench-calibrate-*/job.json")
                if p.stat().st_mtime >= started]
        if any(next(job.glob("logs/**/stderr.log"), None) for job in jobs):
            os.kill(os.getpid(), signal.SIGTERM)
            return
        time.sleep(0.05)


def test_sigterm_during_the_collectives_keeps_the_points_before(monkeypatch, capsys, tmp_path):
    db = tmp_path / "p.db"
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tempfile.tempdir = None  # re-read TMPDIR: the rank job goes under tmp_path
    try:
        watcher = threading.Thread(target=_term_when_launched, args=(tmp_path, time.time() - 1),
                                   daemon=True)
        watcher.start()
        code, _, err = run_main(
            monkeypatch, capsys, "calibrate", "--device", "cpu", "--ops", "memory,collective",
            "--memory-ops", "copy", "--memory-sizes", "64KiB", "--message-sizes", "64MiB",
            "--repeats", "100", "--timeout", "240", "--db", str(db))
    finally:
        tempfile.tempdir = None
    assert code == 128 + signal.SIGTERM, err
    assert "interrupted by SIGTERM during the collectives" in err
    [record] = ResultStore(db).query(kind="profile")
    assert record.status == "interrupted"
    assert [p["curve"] for p in record.metrics["points"]] == ["memory:copy"]
    assert record.metrics["collective_reason"] == "interrupted by SIGTERM during the collectives"
    assert descendants(os.getpid()) == {}  # the launcher killed the agent and every rank
