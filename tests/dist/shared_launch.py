"""Run under torchrun: the cases of several case workers (tests/dist/worker.py,
expert_worker.py, comm_worker.py) in one process group, one worker after the other, each
through its `run(cases, device)`; rank 0 writes the results by worker as JSON.

Usage: torchrun --nproc-per-node N tests/dist/shared_launch.py OUT.json worker.py/name:spec ...
(tests/dist/launch_cases.py builds the arguments from what the test modules registered).
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from accelbench.parallel.dist import init_distributed, teardown


def launched(run: Callable[[list[str], torch.device], Any]) -> None:
    """A launched rank's whole life: one thread, the group, `run(argv cases, device)`, rank 0
    writing what it returned to the OUT.json of argv, the group torn down together (this
    launcher's main and each case worker's own)."""
    torch.set_num_threads(1)
    out_path, args = sys.argv[1], sys.argv[2:]
    _, device = init_distributed("cpu", timeout_s=120)
    results = run(args, device)
    if dist.get_rank() == 0:
        Path(out_path).write_text(json.dumps(results))
    teardown(together=True)


def run_workers(args: list[str], device: torch.device) -> dict[str, Any]:
    """Each worker's cases ('worker.py/name:spec') through its run(cases, device)."""
    by_worker: dict[str, list[str]] = {}
    for arg in args:
        worker, case = arg.split("/", 1)
        by_worker.setdefault(worker, []).append(case)
    # this folder is on the path: the script's own
    return {worker: importlib.import_module(Path(worker).stem).run(cases, device)
            for worker, cases in by_worker.items()}


def main() -> None:
    launched(run_workers)


if __name__ == "__main__":
    main()
