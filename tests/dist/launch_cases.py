"""One torchrun launch per world size for the case workers (tests/dist/worker.py,
expert_worker.py, comm_worker.py): every case of that size, of every worker, runs in it, one
after the other in one process group (tests/dist/shared_launch.py), since a launch costs ~3 s of
Python and torch imports per rank on 2 cores. Test modules register their cases when they are
imported (pytest collects every module before it runs a test), so one launch serves all of
them; rank 0 writes the results as JSON.

Likewise a training sweep that several tests read (shared_sweep): run once per session for an
equal TrainSpec, each of its cells one torchrun launch. Modules that share launches are in one
xdist group (tests/conftest.py), so that one test process runs them.

The checks the modules share live here too: a training case against one process
(assert_ranks_match_one_process, the tolerances) and a case's bytes against the profiler's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.bench.outcome import Outcome
from accelbench.bench.train.rank_result import RankResult
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.parallel.torchrun_launch import launch_torchrun

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
_WANTED: dict[int, dict[str, dict[str, str]]] = {}  # nproc -> worker -> {name: spec}
_BUDGET: dict[tuple[str, int], float] = {}  # (worker, nproc) -> seconds its cases may take
_DONE: dict[int, dict[str, dict]] = {}  # nproc -> worker -> {name: result}
_SWEPT: dict[TrainSpec, tuple[list[Outcome], list[Outcome]]] = {}


def want(worker: str, launches: tuple[tuple[int, dict[str, str]], ...],
         timeout_s: float = 200) -> None:
    """Register a module's cases by world size (at import), for shared_results to launch;
    `timeout_s` bounds the worker's part of each launch (the launch gets the sum of its
    workers')."""
    for nproc, cases in launches:
        wanted = _WANTED.setdefault(nproc, {}).setdefault(worker, {})
        clash = {k for k in cases if wanted.get(k, cases[k]) != cases[k]}
        assert not clash, f"case names registered twice with different specs: {clash}"
        wanted.update(cases)
        _BUDGET[worker, nproc] = max(_BUDGET.get((worker, nproc), 0.0), timeout_s)


def shared_results(worker: str, nproc: int, out_dir: Path) -> dict:
    """The results of every case registered for `worker` on nproc ranks, from the one launch
    of that size per session (the test fails with the failed rank's own error if the launch
    does not succeed)."""
    if nproc not in _DONE:
        workers = _WANTED[nproc]
        out = out_dir / f"shared_{nproc}.json"
        argv = [str(HERE / "shared_launch.py"), str(out),
                *(f"{w}/{k}:{v}" for w, cases in workers.items() for k, v in cases.items())]
        timeout_s = sum(_BUDGET[w, nproc] for w in workers)
        result = launch_torchrun(nproc, argv, timeout_s=timeout_s, cwd=str(ROOT))
        assert result.ok, result.error or result.output
        _DONE[nproc] = json.loads(out.read_text())
    return _DONE[nproc][worker]


def module_results(worker: str, launches: tuple[tuple[int, dict[str, str]], ...],
                   out_dir: Path) -> dict:
    """A module's own cases (as it registered them with `want`), from the shared launches."""
    return {k: v for n, cases in launches
            for k, v in shared_results(worker, n, out_dir).items() if k in cases}


def worker_results(worker: str, launches: tuple[tuple[int, dict[str, str]], ...],
                   out_dir: Path) -> dict:
    """Every result of `worker` from the shared launches of a module's world sizes: its own
    cases and the other modules' cases of that worker (which a module may compare with)."""
    return {k: v for n, _ in launches for k, v in shared_results(worker, n, out_dir).items()}


def launched_cases(worker: str, launches: tuple[tuple[int, dict[str, str]], ...],
                   timeout_s: float = 200, every_case: bool = False):
    """A module's cases registered (want) and its module fixture of their results, from the
    shared launches; `every_case`: all of that worker's results there, not only the module's
    own. Usage: `results = launched_cases("worker.py", LAUNCHES)`."""
    want(worker, launches, timeout_s)

    @pytest.fixture(scope="module")
    def results(tmp_path_factory) -> dict:
        out_dir = tmp_path_factory.mktemp(Path(worker).stem)
        return (worker_results if every_case else module_results)(worker, launches, out_dir)
    return results


# fp32 on CPU: reduction order differs across layouts (all-reduce, split matmuls, experts' rows
# gathered from other ranks), so losses agree to rounding, ~1e-7 relative; 1e-5 leaves room and
# still catches any wrong sync, scale or lost token (the grad norm sums more terms: 1e-4).
LOSS_RTOL = 1e-5
NORM_RTOL = 1e-4


def rel_error(a: list[float], b: list[float]) -> float:
    """The largest relative difference of a series from the reference series b."""
    return max(abs(x - y) / abs(y) for x, y in zip(a, b, strict=True))


def assert_ranks_match_one_process(case: str, result: dict, steps: int) -> None:
    """A case worker's training case (its 'reference' run in one process and its 'ranks'):
    clipping acted (the global norm matters), the loss moved at every one of `steps` steps, and
    every rank's global loss and gradient norm equal one process's within the tolerances."""
    ref = result["reference"]
    assert min(ref["grad_norm"]) > 0.5, (case, ref["grad_norm"])
    assert len({round(x, 6) for x in ref["loss"]}) == steps, (case, ref["loss"])
    for rank in result["ranks"]:
        assert rel_error(rank["loss"], ref["loss"]) < LOSS_RTOL, (case, rank["loss"], ref["loss"])
        assert rel_error(rank["grad_norm"], ref["grad_norm"]) < NORM_RTOL, (case,
                                                                             rank["grad_norm"])


def assert_accounting_matches_the_profiler(case: str, ranks: list[dict]) -> None:
    """comm_worker.py's case: every rank's collectives, with their bytes of buffer, as the
    profiler saw them, equal what the record accounts."""
    for rank in ranks:
        assert rank["profiled"] == pytest.approx(rank["accounted"]), (case, rank["rank"])


def shared_sweep(spec: TrainSpec) -> tuple[list[Outcome], list[Outcome]]:
    """(run_train_sweep's outcomes, everything it sank) for `spec`, run the first time a test
    asks for an equal spec (a failed cell is an outcome too: each test asserts on it)."""
    if spec not in _SWEPT:
        sink: list[Outcome] = []
        _SWEPT[spec] = run_train_sweep(spec, sink.append), sink
    return _SWEPT[spec]


def worker_load(ranks: list[dict]) -> list[RankResult]:
    """A case worker's per-rank dicts (moe_load and mesh coordinates) as the runner's
    RankResult, so the record's own summing (summed_expert_load) reads them."""
    return [RankResult(rank=i, step_times_s=[], loss=[], moe_load=r["moe_load"],
                       coords={k: r[k] for k in ("pp", "dp", "tp") if k in r})
            for i, r in enumerate(ranks)]

