"""Every layout of the runtime trains a Llama-style model (RMSNorm, SwiGLU, rotary, untied head,
no biases) with grouped-query attention as one process does, and uneven pipeline stages
(pp_first / pp_last, Megatron's split) do too, for GPT-2 and Llama (gloo, 2, 3 and 4 CPU
processes; the models and the 5 steps are tests/dist/worker.py's; the 2- and 4-process cases
run in test_parallel.py's launches when both modules are collected: launch_cases.want).

Key/value heads: 'llama' has 4 query heads on 2 key/value heads (tp=2 splits them, one per
rank; tp=4 has two ranks share each), 'mqa' one key/value head (shared by every tensor rank),
'gqa8' 8 query heads on 4 key/value heads (more than tp=2: two per rank).
"""

from __future__ import annotations

import pytest

from tests.dist.launch_cases import assert_ranks_match_one_process, launched_cases

pytestmark = pytest.mark.dist

CASES_2 = {
    # GPT-2, 4 layers: stages of 1 + 3 (1F1B) and 3 + 1 (GPipe)
    "uneven_first": "pp=2,pp_first=1", "uneven_last_gpipe": "pp=2,pp_last=1,schedule=gpipe",
    "llama_ddp": "dp=2", "llama_zero1": "dp=2,zero=1", "llama_zero2": "dp=2,zero=2",
    "llama_zero3": "dp=2,zero=3", "llama_tp": "tp=2", "mqa_tp_sp": "tp=2,sp=1",
    "gqa8_tp": "tp=2", "llama_pp_uneven": "pp=2,pp_first=1",
}
# 3 stages get 3 micro-batches (worker.gas_for): 1 + 2 + 1 layers; interleaved (vp=2), the
# chunks hold 0,1 | 1,1 | 1,0 layers: the first only the embedding, the last only the head
CASES_3 = {"uneven_pp3": "pp=3,pp_first=1,pp_last=1",
           "llama_pp3_uneven": "pp=3,pp_first=1,pp_last=1",
           "ileave_uneven_pp3": "pp=3,vp=2,pp_first=1,pp_last=1",
           "llama_ileave_uneven_pp3": "pp=3,vp=2,pp_first=1,pp_last=1"}
# the combinations: shared key/value heads with FSDP, and with SP and uneven pipeline stages
CASES_4 = {
    "llama_tp4_sp": "tp=4,sp=1", "llama_dp_tp_sp_zero3": "dp=2,tp=2,sp=1,zero=3",
    "mqa_dp_tp_zero2": "dp=2,tp=2,zero=2", "mqa_tp_sp_pp_uneven": "tp=2,sp=1,pp=2,pp_last=1",
    "gqa8_dp_pp_zero1_uneven": "dp=2,pp=2,zero=1,pp_first=1",
    "llama_dp_pp_zero3_uneven": "dp=2,pp=2,zero=3,pp_last=1",
}
LAUNCHES = ((2, CASES_2), (3, CASES_3), (4, CASES_4))
# 2, 3 and 4 processes: one launch per size, shared with test_parallel.py
results = launched_cases("worker.py", LAUNCHES)


@pytest.mark.parametrize("case", [case for _, cases in LAUNCHES for case in cases])
def test_losses_equal_single_process(results, case):
    """5 AdamW steps with clipping: every rank's loss and grad norm match one process."""
    assert_ranks_match_one_process(case, results[case], steps=5)

