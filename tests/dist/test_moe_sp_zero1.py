"""Sequence parallelism with mixture-of-experts blocks, and ZeRO-1 with expert parallelism
(gloo, 2 and 4 CPU processes), each against one process running the same micro-batches.

Under sp each tp rank routes only its sequence shard (the experts' rows are not computed twice),
the per-expert counts and the auxiliary loss's mean scores are summed over tp, and the MoE
parameters' gradients are summed over tp (zero 0: the gradient reduction; zero 3: FSDP2's
all-reduce hook; a pipeline: its reduction). Under ZeRO-1 with ep the dense parameters' AdamW
state is sharded over dp and the experts' over their expert-data-parallel group.
The 'aux' cases weigh the load-balancing loss 0.1 (expert_worker.AUX_COEF), so that a wrong
auxiliary loss under sp shows in the losses and gradient norms.
"""

from __future__ import annotations

import pytest

from accelbench.bench.train.cell_metrics import summed_expert_load
from tests.dist.launch_cases import assert_ranks_match_one_process, launched_cases, worker_load

pytestmark = pytest.mark.dist

ADAM_STATES, FP32_BYTES = 2, 4  # exp_avg and exp_avg_sq per element (the step is a scalar)
CASES_2 = {"aux_tp2_sp": "tp=2,sp=on", "ep2_zero1": "dp=2,ep=2,zero=1"}
CASES_4 = {"aux_dp2_tp2_ep2_sp": "dp=2,tp=2,ep=2,sp=on",
           "aux_dp2_tp2_ep2_sp_zero3": "dp=2,tp=2,ep=2,sp=on,zero=3",
           "aux_tp2_sp_pp2": "tp=2,sp=on,pp=2",
           "dp4_ep2_zero1": "dp=4,ep=2,zero=1", "dp2_pp2_ep2_zero1": "dp=2,pp=2,ep=2,zero=1"}
ZERO1 = ("ep2_zero1", "dp4_ep2_zero1")  # pp = 1: every rank holds the whole model's dense part


LAUNCHES = ((2, CASES_2), (4, CASES_4))
results = launched_cases("expert_worker.py", LAUNCHES, 400)  # in the one launch per size


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4])
def test_losses_and_grad_norms_equal_one_process(results, case):
    """4 AdamW steps with clipping on moe-tiny: every rank's global loss (with the auxiliary
    term) and gradient norm (each expert weight counted once) match one process."""
    assert_ranks_match_one_process(case, results[case], steps=4)


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4])
def test_routed_tokens_summed_over_ranks_equal_one_process(results, case):
    """Tokens routed per layer and expert, summed as the record sums them (over dp, tp 0's
    count): one process's. Under sp each tp rank routed its shard and holds the sum over its
    tp group, so nothing is counted twice or lost."""
    ref, ranks = results[case]["reference"], results[case]["ranks"]
    assert summed_expert_load(worker_load(ranks), "routed") == ref["routed"], case
    assert sum(map(sum, ref["routed"])) > 0
    if "sp" in case:  # the tp ranks of one replica hold the same (whole sequence's) load
        for rank in ranks:
            peer = next(r for r in ranks if (r["pp"], r["dp"]) == (rank["pp"], rank["dp"])
                        and r["tp"] == 0)
            assert rank["moe_load"]["routed"] == peer["moe_load"]["routed"]


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4])
def test_every_routed_row_is_computed_once(results, case):
    """The rows the ranks' experts computed, summed over all ranks, are the assignments one
    process routed (dropless): under sp no tp rank computes another's tokens (without sp each
    of the tp ranks would compute them all: tp times as many), under ep each row only once, on
    its expert's rank."""
    ref, ranks = results[case]["reference"], results[case]["ranks"]
    assert sum(r["expert_rows"] for r in ranks) == sum(map(sum, ref["routed"])) > 0, case


@pytest.mark.parametrize("case", ZERO1)
def test_zero1_with_ep_shards_the_optimizer_state(results, case):
    """Each rank keeps AdamW state for part of what it holds, and the ranks' states together
    cover every parameter of the model exactly once: the dense ones over dp, each expert over
    its expert-data-parallel group (no rank holds another rank's experts' state)."""
    ranks, ep = results[case]["ranks"], 2
    for rank in ranks:
        state, held = rank["state_bytes"]["optim_state_bytes"], rank["state_bytes"]["param_bytes"]
        assert 0 < state < ADAM_STATES * held, (case, state, held)
    model_bytes = ranks[0]["state_bytes"]["param_bytes"] + (ep - 1) * FP32_BYTES * ranks[0][
        "expert_params"]  # the dense parameters and all experts, once
    assert sum(r["state_bytes"]["optim_state_bytes"] for r in ranks) == ADAM_STATES * model_bytes
