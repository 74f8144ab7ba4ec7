"""One torchrun launch of a case worker (tests/dist/worker.py and its like): every case of one
world size runs in that launch, one after the other in one process group, since each launch
costs seconds of Python and torch imports per rank; rank 0 writes the results as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from accelbench.parallel.launch import launch_torchrun

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def run_cases(worker: str, nproc: int, cases: dict[str, str], out_dir: Path,
              timeout_s: float = 200) -> dict:
    """Launch tests/dist/<worker> on nproc ranks with 'name:spec' arguments; its JSON by name
    (the test fails with the failed rank's own error if the launch does not succeed)."""
    out = out_dir / f"{Path(worker).stem}_{nproc}.json"
    argv = [str(HERE / worker), str(out), *(f"{k}:{v}" for k, v in cases.items())]
    result = launch_torchrun(nproc, argv, timeout_s=timeout_s, cwd=str(ROOT))
    assert result.ok, result.error or result.output
    return json.loads(out.read_text())
