"""Context parallelism's bytes as recorded (comm_calls_per_step: the keys and values gathered
over cp in every forward, their gradients reduce-scattered in the backward, the gradients over
dp x cp) against the buffers the profiler sees, with the runner's own step (gloo: cp=2 at fp32
and ZeRO 0 and at bf16 and ZeRO 2 on 2 processes, tp=2 + sp with cp=2 in bf16 on 4;
tests/dist/comm_worker.py's shared launches)."""

from __future__ import annotations

import pytest

from tests.dist.launch_cases import assert_accounting_matches_the_profiler, launched_cases

pytestmark = pytest.mark.dist
CASES_2 = {"cp": "fp32:cp=2", "cp_zero2_bf16": "bf16:cp=2,zero=2"}
CASES_4 = {"tp_sp_cp_bf16": "bf16:tp=2,sp=1,cp=2"}
LAUNCHES = ((2, CASES_2), (4, CASES_4))
results = launched_cases("comm_worker.py", LAUNCHES, 300)  # in test_comm_bytes.py's launches


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4])
def test_cp_accounting_matches_the_profiler(results, case):
    assert_accounting_matches_the_profiler(case, results[case])
    for rank in results[case]:
        assert rank["accounted"]["all_gather"] > 0  # the cp gathers are in the account
