"""Pipeline parallelism with the MoE load-balancing loss (gloo, 2 and 4 CPU processes): moe-tiny
with aux_loss_coef > 0 under pp=2 and dp=2,pp=2,ep=2 against one process running the same
micro-batches. Each stage's AuxLossAutoScaler backpropagates the aux loss of its own layers
(models/moe.py, parallel/pipeline.py); the logged loss adds every stage's aux term. The same
layouts without the loss show that the aux loss does move the routers' gradients, by far more
than the tolerance the pipelines are held to, so a lost aux gradient fails."""

from __future__ import annotations

import pytest

from tests.dist.launch_cases import (
    NORM_RTOL,
    assert_ranks_match_one_process,
    launched_cases,
    rel_error,
)

pytestmark = pytest.mark.dist

# 'aux...' cases weigh the loss 0.1 (expert_worker.AUX_COEF), 'noaux...' 0
CASES_2 = {"aux_pp2": "pp=2", "noaux_pp2": "pp=2"}
CASES_4 = {"aux_dp2_pp2_ep2": "dp=2,pp=2,ep=2", "noaux_dp2_pp2_ep2": "dp=2,pp=2,ep=2"}
LAUNCHES = ((2, CASES_2), (4, CASES_4))
results = launched_cases("expert_worker.py", LAUNCHES, 400)  # in the one launch per size


def _router_norms(ranks: list[dict]) -> list[float]:
    """Per step, the norm of every router's gradient: the stages' squares summed over the
    pipeline ranks of data-parallel replica 0 (routers are dense: averaged over dp)."""
    steps = zip(*(r["router_grad_sq"] for r in ranks if r["dp"] == 0 and r["tp"] == 0),
                strict=True)
    return [sum(step) ** 0.5 for step in steps]


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4])
def test_pipeline_losses_and_grad_norms_equal_one_process(results, case):
    """4 AdamW steps with clipping: every rank's logged loss (cross-entropy + coef x the mean
    aux loss of all stages' layers) and global gradient norm match one process."""
    ranks = results[case]["ranks"]
    assert len(ranks) == (2 if case in CASES_2 else 4)
    assert {r["pp"] for r in ranks} == {0, 1}
    assert_ranks_match_one_process(case, results[case], steps=4)


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4])
def test_router_gradients_equal_one_process(results, case):
    """The routers' gradient norm, gathered over the stages, equals one process's: the aux
    loss of the first stage's layer reached its router through that stage's backward."""
    ref, ranks = results[case]["reference"], results[case]["ranks"]
    assert all(len(r["router_grad_sq"]) == 4 for r in ranks)
    assert all(r["router_grad_sq"][0] > 0 for r in ranks)  # each stage holds one MoE layer
    ours = _router_norms(ranks)
    assert rel_error(ours, [x ** 0.5 for x in ref["router_grad_sq"]]) < NORM_RTOL, (case, ours)


@pytest.mark.parametrize("layout", ["pp2", "dp2_pp2_ep2"])
def test_the_aux_loss_moves_the_routers_and_the_loss(results, layout):
    """With the loss the routers' gradients differ from without it by over 100 x NORM_RTOL,
    and the logged loss is higher by the aux term (about coef x top-k = 0.1 x 2: the value of
    balanced routing, E x sum_e f_e P_e with the f_e summing to k and the P_e near 1 / E)."""
    with_aux, without = results[f"aux_{layout}"], results[f"noaux_{layout}"]
    a, b = _router_norms(with_aux["ranks"]), _router_norms(without["ranks"])
    assert rel_error(a, b) > 100 * NORM_RTOL, (a, b)
    first_step_gap = with_aux["ranks"][0]["loss"][0] - without["ranks"][0]["loss"][0]
    assert 0.2 * 0.95 < first_step_gap < 0.2 * 1.25, first_step_gap
