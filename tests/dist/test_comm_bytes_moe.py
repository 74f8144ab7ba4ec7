"""The bytes per step recorded for mixture-of-experts cells (comm_calls_per_step) are the
buffers this implementation's collectives carry, as the profiler sees them on gloo: moe-tiny on
4 CPU processes (comm_worker.py's launch of 4, shared with the dense cases), 2 micro-batches;
dense gradients over dp and experts over their expert-data-parallel group at zero 0, 1 and 3,
sequence parallelism's MoE gradient sums over tp, a pipeline. The all-to-all's rows per rank
depend on the routing: their calls are checked per rank, their bytes summed over the ranks
(every row a rank sends another receives, so the sum of the uniform-routing expectation is
exact); the counts exchange exactly per rank."""

from __future__ import annotations

import pytest

from tests.dist.launch_cases import launched_cases

pytestmark = pytest.mark.dist

CASES_4 = {
    "dp4_ep2": "fp32:dp=4,ep=2", "dp4_ep2_zero1": "fp32:dp=4,ep=2,zero=1",
    "dp4_ep2_zero3": "fp32:dp=4,ep=2,zero=3", "dp2_tp2_ep2_sp_bf16": "bf16:dp=2,tp=2,ep=2,sp=1",
    "dp2_tp2_ep2_sp_zero3": "fp32:dp=2,tp=2,ep=2,sp=1,zero=3",
    "dp2_pp2_ep2_zero1": "fp32:dp=2,pp=2,ep=2,zero=1",
}
ROWS = "all_to_all"
# tests/dist/comm_moe_worker.py's cases, in comm_worker.py's launch of 4 (test_comm_bytes.py's)
LAUNCHES = ((4, {name: f"moe:{case}" for name, case in CASES_4.items()}),)
results = launched_cases("comm_worker.py", LAUNCHES, 300)


@pytest.mark.parametrize("case", CASES_4)
def test_accounting_matches_the_profiler(results, case):
    """Every rank: the same collectives with the same buffers as accounted, but the rows,
    and as many all-to-alls of each kind (ZeRO-1 broadcasts per parameter, so other ops'
    calls are not compared)."""
    for rank in results[case]:
        seen = {op: b for op, b in rank["profiled"].items() if op != ROWS}
        expected = {op: b for op, b in rank["accounted"].items() if op != ROWS}
        assert seen == pytest.approx(expected), (case, rank["rank"])
        for op in (ROWS, "all_to_all_counts"):
            assert rank["profiled_calls"][op] == rank["accounted_calls"][op], (case, op)


@pytest.mark.parametrize("case", CASES_4)
def test_routed_rows_summed_over_the_ranks_match(results, case):
    """The rows every rank put into all-to-alls: what the ranks' expectations sum to."""
    ranks = results[case]
    assert all(r["profiled"].get(ROWS, 0) > 0 for r in ranks)
    assert sum(r["profiled"][ROWS] for r in ranks) == pytest.approx(
        sum(r["accounted"][ROWS] for r in ranks))
