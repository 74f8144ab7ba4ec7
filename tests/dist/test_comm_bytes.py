"""The bytes per step recorded for a distributed cell (comm_calls_per_step) are the buffers
this implementation's collectives really carry, as the profiler sees them (gloo, 2 and 4 CPU
processes, dp = 2 and pp = 2 groups, 2 micro-batches)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.parallel.launch import launch_torchrun

pytestmark = pytest.mark.dist

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
CASES_2 = {
    "ddp": "fp32:dp=2", "zero1": "fp32:dp=2,zero=1", "zero2": "fp32:dp=2,zero=2",
    "zero3": "fp32:dp=2,zero=3", "pp_tied": "fp32:pp=2", "pp_tied_bf16": "bf16:pp=2",
    "tp_bf16": "bf16:tp=2", "tp_sp_bf16": "bf16:tp=2,sp=1",
    "mqa_tp_bf16": "bf16:tp=2", "mqa_tp_sp_fp32": "fp32:tp=2,sp=1",
}
CASES_4 = {"dp_pp_zero1": "fp32:dp=2,pp=2,zero=1", "dp_pp_zero2": "fp32:dp=2,pp=2,zero=2",
           "dp_pp_zero3": "fp32:dp=2,pp=2,zero=3"}


def _run(nproc: int, cases: dict[str, str], tmp_path: Path) -> dict:
    out = tmp_path / f"comm_{nproc}.json"
    argv = [str(HERE / "comm_worker.py"), str(out), *(f"{k}:{v}" for k, v in cases.items())]
    result = launch_torchrun(nproc, argv, timeout_s=300, cwd=str(ROOT))
    assert result.ok, result.error or result.output
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("comm")
    return {**_run(2, CASES_2, tmp), **_run(4, CASES_4, tmp)}


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4])
def test_accounting_matches_the_profiler(results, case):
    """Every rank: the same collectives, with the same bytes of buffer, as accounted."""
    for rank in results[case]:
        assert rank["profiled"] == pytest.approx(rank["accounted"]), (case, rank["rank"])
