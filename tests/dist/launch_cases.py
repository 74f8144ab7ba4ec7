"""One torchrun launch of a case worker (tests/dist/worker.py and its like) per world size:
every case of that size runs in it, one after the other in one process group, since a launch
costs ~3 s of Python and torch imports per rank on 2 cores. Test modules that share a worker
register their cases when they are imported (pytest collects every module before it runs a
test), so one launch serves all of them; rank 0 writes the results as JSON.

Likewise a training sweep that several tests read (shared_sweep): run once per session for an
equal TrainSpec, each of its cells one torchrun launch. Modules that share launches are in one
xdist group (tests/conftest.py), so that one test process runs them."""

from __future__ import annotations

import json
from pathlib import Path

from accelbench.bench.outcome import Outcome
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.parallel.launch import launch_torchrun

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
_WANTED: dict[tuple[str, int], dict[str, str]] = {}  # (worker, nproc) -> {name: spec}
_DONE: dict[tuple[str, int], dict] = {}
_SWEPT: dict[TrainSpec, tuple[list[Outcome], list[Outcome]]] = {}


def run_cases(worker: str, nproc: int, cases: dict[str, str], out_dir: Path,
              timeout_s: float = 200) -> dict:
    """Launch tests/dist/<worker> on nproc ranks with 'name:spec' arguments; its JSON by name
    (the test fails with the failed rank's own error if the launch does not succeed)."""
    out = out_dir / f"{Path(worker).stem}_{nproc}.json"
    argv = [str(HERE / worker), str(out), *(f"{k}:{v}" for k, v in cases.items())]
    result = launch_torchrun(nproc, argv, timeout_s=timeout_s, cwd=str(ROOT))
    assert result.ok, result.error or result.output
    return json.loads(out.read_text())


def want(worker: str, launches: tuple[tuple[int, dict[str, str]], ...]) -> None:
    """Register a module's cases by world size (at import), for shared_results to launch."""
    for nproc, cases in launches:
        wanted = _WANTED.setdefault((worker, nproc), {})
        clash = {k for k in cases if wanted.get(k, cases[k]) != cases[k]}
        assert not clash, f"case names registered twice with different specs: {clash}"
        wanted.update(cases)


def shared_results(worker: str, nproc: int, out_dir: Path, timeout_s: float = 200) -> dict:
    """The results of every case registered for (worker, nproc), from one launch per session."""
    key = (worker, nproc)
    if key not in _DONE:
        _DONE[key] = run_cases(worker, nproc, _WANTED[key], out_dir, timeout_s)
    return _DONE[key]


def module_results(worker: str, launches: tuple[tuple[int, dict[str, str]], ...], out_dir: Path,
                   timeout_s: float = 200) -> dict:
    """A module's own cases (as it registered them with `want`), from the shared launches."""
    return {k: v for n, cases in launches
            for k, v in shared_results(worker, n, out_dir, timeout_s).items() if k in cases}


def shared_sweep(spec: TrainSpec) -> tuple[list[Outcome], list[Outcome]]:
    """(run_train_sweep's outcomes, everything it sank) for `spec`, run the first time a test
    asks for an equal spec (a failed cell is an outcome too: each test asserts on it)."""
    if spec not in _SWEPT:
        sink: list[Outcome] = []
        _SWEPT[spec] = run_train_sweep(spec, sink.append), sink
    return _SWEPT[spec]
