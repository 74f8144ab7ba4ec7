"""Uneven pipeline stages (pp_first / pp_last, Megatron's split) reproduce single-process
training (gloo, 2 and 3 CPU processes), as every even layout does in test_parallel.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.parallel.launch import launch_torchrun

pytestmark = pytest.mark.dist

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
LOSS_RTOL = 1e-5  # as test_parallel.py: fp32 reduction order only
NORM_RTOL = 1e-4
# GPT-2 tiny with 4 layers (tests/dist/worker.py): stages (1, 3), (3, 1) and (1, 2, 1)
CASES_2 = {"uneven_first": "pp=2,pp_first=1",
           "uneven_last_gpipe": "pp=2,pp_last=1,schedule=gpipe"}
CASES_3 = {"uneven_pp3": "pp=3,pp_first=1,pp_last=1"}


def _run(nproc: int, cases: dict[str, str], tmp_path: Path) -> dict:
    out = tmp_path / f"results_{nproc}.json"
    argv = [str(HERE / "worker.py"), str(out), *(f"{k}:{v}" for k, v in cases.items())]
    result = launch_torchrun(nproc, argv, timeout_s=200, cwd=str(ROOT))
    assert result.ok, result.error or result.output
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    """The launches, once per module: 2 processes, then 3."""
    tmp = tmp_path_factory.mktemp("llama")
    return {**_run(2, CASES_2, tmp), **_run(3, CASES_3, tmp)}


def _rel(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) / abs(y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("case", [*CASES_2, *CASES_3])
def test_losses_equal_single_process(results, case):
    """5 AdamW steps with clipping: every rank's loss and grad norm match one process."""
    ref = results[case]["reference"]
    assert min(ref["grad_norm"]) > 0.5  # clipping acted, so the global norm matters
    assert len({round(a, 6) for a in ref["loss"]}) == 5  # the loss moves every step
    for rank in results[case]["ranks"]:
        assert _rel(rank["loss"], ref["loss"]) < LOSS_RTOL, (case, rank["loss"], ref["loss"])
        assert _rel(rank["grad_norm"], ref["grad_norm"]) < NORM_RTOL

