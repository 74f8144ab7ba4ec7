"""The bytes per step recorded for a distributed cell (comm_calls_per_step) are the buffers
this implementation's collectives really carry, as the profiler sees them (gloo, 2 and 4 CPU
processes, dp = 2 and pp = 2 groups, 2 micro-batches; one launch of tests/dist/comm_worker.py
per size, shared with test_comm_bytes_cp.py and test_comm_bytes_moe.py)."""

from __future__ import annotations

import pytest

from tests.dist.launch_cases import assert_accounting_matches_the_profiler, launched_cases

pytestmark = pytest.mark.dist

CASES_2 = {
    "ddp": "fp32:dp=2", "zero1": "fp32:dp=2,zero=1", "zero2": "fp32:dp=2,zero=2",
    "zero3": "fp32:dp=2,zero=3", "pp_tied": "fp32:pp=2", "pp_tied_bf16": "bf16:pp=2",
    "tp_bf16": "bf16:tp=2", "tp_sp_bf16": "bf16:tp=2,sp=1",
    "mqa_tp_bf16": "bf16:tp=2", "mqa_tp_sp_fp32": "fp32:tp=2,sp=1",
}
CASES_4 = {"dp_pp_zero1": "fp32:dp=2,pp=2,zero=1", "dp_pp_zero2": "fp32:dp=2,pp=2,zero=2",
           "dp_pp_zero3": "fp32:dp=2,pp=2,zero=3"}
LAUNCHES = ((2, CASES_2), (4, CASES_4))
# one launch per size, shared with the other comm modules
results = launched_cases("comm_worker.py", LAUNCHES, 300)


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4])
def test_accounting_matches_the_profiler(results, case):
    """Every rank: the same collectives, with the same bytes of buffer, as accounted."""
    assert_accounting_matches_the_profiler(case, results[case])
