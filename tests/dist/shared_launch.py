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
from pathlib import Path

import torch
import torch.distributed as dist

from accelbench.parallel.dist import init_distributed, teardown


def main() -> None:
    torch.set_num_threads(1)
    out_path, args = sys.argv[1], sys.argv[2:]
    _, device = init_distributed("cpu", timeout_s=120)
    by_worker: dict[str, list[str]] = {}
    for arg in args:
        worker, case = arg.split("/", 1)
        by_worker.setdefault(worker, []).append(case)
    results = {}
    for worker, cases in by_worker.items():  # this folder is on the path: the script's own
        results[worker] = importlib.import_module(Path(worker).stem).run(cases, device)
    if dist.get_rank() == 0:
        Path(out_path).write_text(json.dumps(results))
    teardown(together=True)


if __name__ == "__main__":
    main()
