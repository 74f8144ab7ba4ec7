"""`--compile` under process groups (issue 37.3): a small cell compiled on each layout that puts
collectives around or inside the compiled blocks (DDP's bucket hooks, FSDP2's gathers, tensor
and sequence parallel DTensors, pipeline stages, context parallel's key/value gather, the
expert all-to-all) trains as the eager cell does, and Dynamo did compile graphs: no layout runs
eager while the record says compiled. Sequence parallelism does not compile (torch 2.13) and is
refused before anything runs (tests/unit/test_compile_refusals.py). Gloo, 2 processes, one
shared launch; the suite's cases compile with Dynamo's capture and AOTAutograd (backend
aot_eager), inductor's code generation being minutes a layout on 2 cores; docs/parallel.md
gives the inductor run by hand. The models' heads are 1,024 wide (compile_worker.py VOCAB): what
compiles is the blocks and their collectives, and GPT-2's head cost ~7 s of the cases' ~49 s of
CPU."""

from __future__ import annotations

import pytest

from tests.dist.launch_cases import launched_cases

pytestmark = [pytest.mark.dist, pytest.mark.slow]
CASES_2 = {f"compile_{name}": f"{layout}:aot_eager" for name, layout in (
    ("dp", "dp=2"), ("zero3", "dp=2,zero=3"), ("tp", "tp=2"), ("pp", "pp=2"),
    ("cp", "cp=2"), ("ep", "dp=2,ep=2"))}
LAUNCHES = ((2, CASES_2),)
results = launched_cases("compile_worker.py", LAUNCHES, 400)
# fp32 on CPU: a compiled graph may fuse and reorder, so losses agree to rounding (~1e-7)
LOSS_RTOL = 1e-5


@pytest.mark.parametrize("case", list(CASES_2))
def test_compiled_cell_trains_as_the_eager_one(results, case):
    got = results[case]
    assert got["error"] is None, got["error"]
    assert got["graphs"] > 0  # Dynamo compiled the blocks: not an eager run called compiled
    assert got["compiled"] == pytest.approx(got["eager"], rel=LOSS_RTOL)
