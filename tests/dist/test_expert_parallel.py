"""Expert parallelism (gloo, 2 and 4 CPU processes): the all-to-all dispatch alone against every
expert in one process (uneven token counts, an expert nobody routes to, a rank that routes
nothing), and MoE training under ep=2 (dp=2,ep=2) and dp=4,ep=2 (Megatron-Core's convention: ep
carved out of dp) against one process running the same micro-batches; capacity drops counted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.analytics.flops import dropped_flops
from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.cell_metrics import summed_expert_load
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.presets import get_preset
from tests.dist.launch_cases import assert_ranks_match_one_process, launched_cases, worker_load

pytestmark = pytest.mark.dist

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
DISPATCH_ATOL = 1e-6  # the same expert products; only the all-to-all moved them
# "ep2" profiles its last step (test_all_to_all_seen_by_the_profiler)
CASES_2 = {"ep2": "ep=2:collectives", "capacity_ep2": "ep=2", "ep2_zero3": "ep=2,zero=3"}
CASES_4 = {"dp4_ep2": "dp=4,ep=2", "dp2_pp2_ep2": "dp=2,pp=2,ep=2",
           "dp4_ep2_zero2": "dp=4,ep=2,zero=2", "dp2_pp2_ep2_zero3": "dp=2,pp=2,ep=2,zero=3",
           "dp2_tp2_ep2": "dp=2,tp=2,ep=2", "dp2_tp2_ep2_zero3": "dp=2,tp=2,ep=2,zero=3"}


LAUNCHES = ((2, CASES_2), (4, CASES_4))
# the cases (and the 2-process dispatch checks): in the one launch per size
results = launched_cases("expert_worker.py", LAUNCHES, 400, every_case=True)


@pytest.mark.parametrize("case", ["uneven", "empty"])
def test_dispatch_equals_every_expert_in_one_process(results, case):
    """Outputs, input gradients and expert weight gradients of the ep=2 all-to-all dispatch
    equal running all experts here; rows received are the assignments to this rank's experts
    (rank 1 of 'uneven' receives only 2, rank 1 of 'empty' sends none)."""
    ranks = results[case]
    for rank in ranks:
        assert rank["out_err"] < DISPATCH_ATOL and rank["x_grad_err"] < DISPATCH_ATOL
        assert rank["w_grad_err"] < DISPATCH_ATOL and rank["w_grad_norm"] > 0
    assert [r["rows_received"] for r in ranks] == {"uneven": [9, 2], "empty": [1, 3]}[case]


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4])
def test_ep_losses_equal_one_process(results, case):
    """4 AdamW steps with clipping on moe-tiny: every rank's global loss and gradient norm
    match one process; each rank holds half the experts (of its stage's layers)."""
    ranks = results[case]["ranks"]
    assert_ranks_match_one_process(case, results[case], steps=4)
    assert len({r["expert_params"] for r in ranks}) == 1 and ranks[0]["expert_params"] > 0
    assert ranks[0]["expert_params"] == results["ep2"]["ranks"][0]["expert_params"] // (
        2 if "pp2" in case else 1)


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4])
def test_load_per_expert_sums_to_one_process(results, case):
    """Tokens routed and dropped per layer and expert, summed over the ranks (each counts its
    own tokens), equal one process's; capacity factor 1 drops some, dropless none."""
    ref = results[case]["reference"]
    ranks = worker_load(results[case]["ranks"])
    for key in ("routed", "dropped"):  # the record's sum: over dp, the stages' layers in order
        assert summed_expert_load(ranks, key) == ref[key], (case, key)
    dropped = sum(map(sum, ref["dropped"]))
    assert (dropped > 0) == case.startswith("capacity")
    assert sum(map(sum, ref["routed"])) > dropped


def test_all_to_all_seen_by_the_profiler(results):
    """The dispatch's all-to-alls are collectives the profiler names (what the runner times)."""
    for rank in results["ep2"]["ranks"]:
        assert any("all_to_all" in n or "alltoall" in n for n in rank["comm_by_name"])


def test_the_runner_records_the_load_and_the_all_to_all():
    """`accelbench train`'s one runner under ep=2 with capacity factor 1: the record holds
    every assignment of the timed steps per layer and expert (2 layers x top-2 x the tokens),
    the dropped ones among them, and the all-to-all time measured in the profiled step."""
    cfg = get_preset("moe-tiny").with_changes(n_positions=64, vocab_size=1024,
                                              capacity_factor=1.0)
    spec = TrainSpec(model=cfg, seq_lens=(32,), micro_batches=(2,), gas=(2,), dtypes=("fp32",),
                     steps=3, warmup_steps=1, device="cpu", nproc=2, cell_timeout_s=600, trials=1,
                     layout="ep=2", peaks=(SweepPeak("fp32", 1e11, "fp32", "given"),))
    outcome = run_train_sweep(spec, lambda o: None)[0]
    assert outcome.status == "ok", outcome.reason
    m = outcome.metrics
    routed, dropped = m["moe_tokens_routed_per_expert"], m["moe_tokens_dropped_per_expert"]
    assert len(routed) == 2 and all(len(layer) == 8 for layer in routed)
    timed_tokens = m["timed_steps"] * m["tokens_per_step_global"]
    assert [sum(layer) for layer in routed] == [2 * timed_tokens] * 2  # top-2
    assert 0 < sum(map(sum, dropped)) < sum(map(sum, routed))
    assert m["moe_drop_fraction"] == pytest.approx(sum(map(sum, dropped)) / (4 * timed_tokens))
    assert m["moe_load_imbalance"] >= 1.0
    assert all(a > 0 for a in m["all_to_all_time_s_per_rank"])
    assert 0 < m["all_to_all_fraction"] < 1
    assert m["mfu"] > 0 and len(m["mem_peak_bytes_per_rank"]) == 2
    # capacity drops skip expert work: hardware FLOPs (HFU) are net of it, model FLOPs are not
    per_step = sum(map(sum, dropped)) / m["timed_steps"]
    skipped = dropped_flops(cfg, per_step).total
    assert m["hardware_flops_per_step_global"] == pytest.approx(
        m["model_flops_per_step_global"] - skipped)
    assert m["hfu"] < m["mfu"]


def test_ep_not_dividing_the_experts_is_one_line_and_exit_2():
    """moe-tiny's 8 experts over ep=3: refused before anything runs."""
    cli = str(Path(sys.executable).parent / "accelbench")
    result = subprocess.run([cli, "train", "--model", "moe-tiny", "--layout", "dp=3,ep=3",
                             "--nproc", "3", "--device", "cpu"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "error: layout.ep: ep=3 does not divide the 8 experts (each expert-parallel rank holds "
        "experts / ep whole experts) (allowed: a divisor of 8)"]
