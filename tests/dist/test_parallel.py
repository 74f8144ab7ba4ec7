"""Parallel layouts reproduce single-process training, shard what ZeRO says, and a dead or hung
rank is reported by the launcher within its deadline (gloo, 2 and 4 CPU processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.parallel.torchrun_launch import launch_torchrun
from tests.dist.launch_cases import assert_ranks_match_one_process, launched_cases

pytestmark = pytest.mark.dist

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
CASES_2 = {
    "ddp": "dp=2", "zero1": "dp=2,zero=1", "zero2": "dp=2,zero=2", "zero3": "dp=2,zero=3",
    "tp": "tp=2", "tp_sp": "tp=2,sp=1", "pp_gpipe": "pp=2,schedule=gpipe",
    "pp_1f1b": "pp=2,schedule=1f1b", "pp_interleaved": "pp=2,vp=2,schedule=interleaved_1f1b",
}
CASES_4 = {
    "dp_tp": "dp=2,tp=2", "dp_tp_zero2": "dp=2,tp=2,zero=2",
    "dp_tp_sp_zero3": "dp=2,tp=2,zero=3,sp=1",
    "dp_pp": "dp=2,pp=2", "dp_pp_zero1": "dp=2,pp=2,zero=1", "tp_pp": "tp=2,pp=2",
    "dp_pp_zero2": "dp=2,pp=2,zero=2",
    "dp_pp_zero3_interleaved": "dp=2,pp=2,vp=2,zero=3,schedule=interleaved_1f1b",
    "tp_sp_pp_interleaved": "tp=2,sp=1,pp=2,vp=2,schedule=interleaved_1f1b",
    # GenSLM's GPT-NeoX form: rotary on a quarter of each head, parallel residual, untied head
    "neox_dp_tp_sp_zero3": "dp=2,tp=2,sp=1,zero=3", "neox_tp_sp_pp": "tp=2,sp=1,pp=2",
}
CASES_8 = {"dp_tp_pp": "dp=2,tp=2,pp=2", "dp_tp_sp_pp_zero3": "dp=2,tp=2,sp=1,pp=2,zero=3"}
PROFILED = ("ddp", "zero3", "tp", "pp_1f1b")  # test_collective_time_measured's cases


def _profiling(cases: dict[str, str]) -> dict[str, str]:
    """The cases with the worker's 'collectives' flag on those PROFILED."""
    return {k: f"{v}:collectives" if k in PROFILED else v for k, v in cases.items()}


LAUNCHES = tuple((n, _profiling(cases)) for n, cases in ((2, CASES_2), (4, CASES_4), (8, CASES_8)))
# 2 processes, then 4, then 8: one launch per size, shared with test_llama_layouts.py
results = launched_cases("worker.py", LAUNCHES)


@pytest.mark.parametrize("case", [*CASES_2, *CASES_4, *CASES_8])
def test_losses_equal_single_process(results, case):
    """5 AdamW steps with clipping: every rank's global loss and grad norm match one process."""
    assert_ranks_match_one_process(case, results[case], steps=5)


def test_zero_stages_shard_state(results):
    """Per-rank bytes of parameters (after forward) + gradients + optimizer state fall with the
    ZeRO stage: 4P (DDP), P+P+P (ZeRO-1), P+P/2+P (ZeRO-2), P/2+P/2+P (ZeRO-3) for dp=2."""
    def state(case):
        b = results[case]["ranks"][0]["bytes"]
        return b["param_bytes_after_forward"], b["grad_bytes"], b["optim_state_bytes"]

    p0, g0, o0 = state("ddp")
    assert o0 == 2 * p0 and g0 == p0  # AdamW: two fp32 moments per parameter
    totals = [sum(state(c)) for c in ("ddp", "zero1", "zero2", "zero3")]
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4
    for case in ("zero1", "zero2", "zero3"):  # optimizer state halved (ZeRO-1 within a tensor)
        assert state(case)[2] == pytest.approx(o0 / 2, rel=0.05)
    assert state("zero1")[1] == g0
    for case in ("zero2", "zero3"):
        assert state(case)[1] == pytest.approx(g0 / 2, rel=0.01)
    assert state("zero2")[0] == p0  # gathered from forward to backward
    assert state("zero3")[0] == pytest.approx(p0 / 2, rel=0.01)  # resharded after forward


def test_ranks_gathered_with_coordinates(results):
    """gather_rank_results returns one dict per rank, each at its own mesh coordinate."""
    ranks = results["dp_tp_zero2"]["ranks"]
    assert len(ranks) == 4
    assert {(r["pp"], r["dp"], r["tp"]) for r in ranks} == {(0, d, t) for d in (0, 1)
                                                             for t in (0, 1)}


def test_collective_time_measured(results):
    """The profiler sees time in gloo collectives when ranks communicate."""
    for case in PROFILED:
        assert len(results[case]["ranks"][0]["collective_s"]) == 5, case
        assert all(t > 0 for t in results[case]["ranks"][0]["collective_s"]), case


def test_killed_rank_reported():
    """A rank that exits with an error ends the launch well before the deadline, named."""
    result = launch_torchrun(2, [str(HERE / "crash_worker.py"), "exit"], timeout_s=25,
                             cwd=str(ROOT))
    assert not result.ok and not result.timed_out
    assert result.failed_rank == 1
    assert result.error == "RuntimeError: simulated crash"  # its error line, not its other output
    assert result.wall_s < 25


def _running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def test_hung_rank_killed_at_deadline(tmp_path):
    """A stopped rank (SIGSTOP: deaf to SIGTERM) does not hang the caller and does not outlive
    the launch: torchrun's workers sit in sessions of their own, out of reach of killpg."""
    result = launch_torchrun(2, [str(HERE / "crash_worker.py"), "hang", str(tmp_path)],
                             timeout_s=15, cwd=str(ROOT))  # the ranks start within it, loaded
    assert result.timed_out and result.returncode is None
    assert result.error.startswith("timed out after 15 s")
    assert "rank 1 silent for" in result.error and "rank 1 reached the hang" in result.error
    assert result.wall_s < 15 + 12
    pids = [int(p.read_text()) for p in sorted(tmp_path.glob("*.pid"))]
    assert len(pids) == 2
    assert not [pid for pid in pids if _running(pid)]
