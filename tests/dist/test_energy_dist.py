"""Energy of a two-rank cell: each rank meters its own window, rank 0 sums them and keeps
each rank's figures; a host-wide counter read by both ranks is counted once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.parallel.torchrun_launch import launch_torchrun

# one 2-rank launch at a time, beside the "dist" group's launches (tests/conftest.py)
pytestmark = [pytest.mark.dist, pytest.mark.xdist_group("dist-2ranks")]

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def _run(mode: str, tmp_path: Path) -> dict:
    out = tmp_path / f"{mode}.json"
    result = launch_torchrun(2, [str(HERE / "energy_worker.py"), str(out), mode],
                             timeout_s=300, cwd=str(ROOT))
    assert result.ok, result.error or result.output
    record = json.loads(out.read_text())
    assert record["status"] == "ok", record["reason"]
    return record["metrics"]


def test_two_ranks_sum_their_devices_and_keep_each(tmp_path):
    m = _run("device", tmp_path)
    assert m["energy_devices"] == ["rank0 dev0", "rank1 dev0"]
    assert m["energy_j"] == pytest.approx(sum(m["energy_j_per_rank"]))
    rank0, rank1 = m["energy_j_per_rank"]
    assert m["avg_power_w_per_device"] == [pytest.approx(10.0, rel=1e-3),
                                           pytest.approx(20.0, rel=1e-3)]
    # each rank's joules are its own window's (its power above times its window): not twice
    # rank 0's, since under load one rank can wait seconds longer at the first collective
    assert rank0 > 0 and rank1 > 0
    tokens = m["tokens_per_step_global"] * m["timed_steps"]  # both replicas' tokens
    assert m["tokens_per_step_global"] == 2 * 2 * 32
    assert m["energy_per_token_j"] == pytest.approx(m["energy_j"] / tokens)


def test_a_host_wide_counter_counts_once(tmp_path):
    m = _run("host", tmp_path)
    assert len(m["energy_j_per_rank"]) == 2
    assert m["energy_j"] == pytest.approx(m["energy_j_per_rank"][0])  # rank 0's reading only
    assert m["energy_devices"] == ["rank0 dev0"]
    assert "counted once per host (1)" in m["energy_note"]
