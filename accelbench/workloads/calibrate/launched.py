"""One torchrun launch of a calibrate worker module: the job written as JSON into a temporary
folder, rank 0's result read back from it; shared by the collectives and the concurrent
compute benchmarks."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from accelbench.parallel.procs import Interrupted
from accelbench.parallel.torchrun_launch import launch_torchrun

JOB_FILE = "job.json"


def launch_job(module: str, nproc: int, job: dict[str, Any], device_type: str,
               timeout_s: float, result_file: str) -> tuple[Any, str]:
    """(rank 0's JSON result, "") or (None, why the launch failed); an interrupted launch
    stops the command too (Interrupted). CPU ranks run one thread each."""
    env = {"OMP_NUM_THREADS": "1"} if device_type == "cpu" else {}
    with tempfile.TemporaryDirectory(prefix="accelbench-calibrate-") as tmp:
        Path(tmp, JOB_FILE).write_text(json.dumps(job))
        result = launch_torchrun(nproc, ["-m", module, tmp], timeout_s, env=env, work_dir=tmp)
        path = Path(tmp, result_file)
        if path.exists():
            return json.loads(path.read_text()), ""
    if result.interrupted is not None:  # the ranks are stopped; the command stops too
        raise Interrupted(result.interrupted)
    rank = f"rank {result.failed_rank}: " if result.failed_rank is not None else ""
    return None, f"{rank}{result.error}"
