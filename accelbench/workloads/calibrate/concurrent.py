"""The compute points measured on every launched rank at once (`calibrate --concurrent`): a
launched training run's rank computes while its neighbours do, and on a CPU they share the
cores, caches and memory bandwidth. Each rank runs the same benchmarks at one thread (its own
device on an accelerator), every benchmark starting after a barrier; rank 0's times and peaks
are kept."""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from accelbench.analytics.machine_profile import Point, point_dict, point_from_dict
from accelbench.parallel.dist import init_distributed, read_env, teardown
from accelbench.parallel.procs import watch_parent
from accelbench.parallel.rank_files import write_rank_error
from accelbench.workloads.calibrate.launched import JOB_FILE, launch_job
from accelbench.workloads.calibrate.micro_steps import compute_steps, dtype_peaks, run_steps
from accelbench.workloads.calibrate.options import CalibrateSpec, spec_from_dict

RESULT_FILE = "compute.json"
Peaks = dict[str, tuple[float | None, str]]


@dataclass(frozen=True)
class RankZeroResult:
    """What rank 0 writes to RESULT_FILE (as JSON) for the launcher: its points (point_dict),
    peaks by dtype and notes."""

    points: list[dict]
    peaks: dict[str, list]
    notes: list[str]


def _together(step):
    """A benchmark that starts when every rank reaches it."""
    def run() -> list[Point]:
        dist.barrier()
        return step()

    return run


def worker_main(folder: str) -> None:
    """A launched rank: every compute benchmark of the job's spec, together with the other
    ranks; rank 0 writes its points, peaks and notes. An exception is written to the folder
    (the launcher names the rank) and raised."""
    work, rank = Path(folder), read_env().rank
    watch_parent(os.getppid(), signal.SIGKILL)  # an orphan has no one to report to
    job = json.loads((work / JOB_FILE).read_text())
    try:
        info, device = init_distributed(job["device_type"], timeout_s=job["timeout_s"])
        spec, notes = spec_from_dict(job["spec"]), []
        if device.type == "cpu":
            torch.set_num_threads(1)
        steps = [(label, _together(step)) for label, step in compute_steps(spec, device, notes)]
        points = run_steps(steps, device, notes, None)
        dist.barrier()
        peaks = dtype_peaks(points, device)
        if info.rank == 0:
            result = RankZeroResult([point_dict(p) for p in points], peaks, notes)
            (work / RESULT_FILE).write_text(json.dumps(asdict(result)))
        teardown(together=True)
    except BaseException as err:
        write_rank_error(work, rank, err)
        raise


def measure_concurrent(spec: CalibrateSpec, device_type: str
                       ) -> tuple[list[Point], Peaks, list[str]]:
    """(points, peaks, notes) of the compute benchmarks on spec.nproc launched ranks at
    once; no points and why (in the notes) when the launch fails."""
    job = {"device_type": device_type, "timeout_s": spec.timeout_s, "spec": spec.to_dict()}
    data, why = launch_job(__name__, spec.nproc, job, device_type, spec.timeout_s, RESULT_FILE)
    if data is None:
        return [], {}, [f"compute on {spec.nproc} processes failed: {why}"[:2000]]
    result = RankZeroResult(**data)
    peaks = {d: (v, label) for d, (v, label) in result.peaks.items()}
    notes = [f"compute on {spec.nproc} ranks at once (rank 0's times)", *result.notes]
    return [point_from_dict(d) for d in result.points], peaks, notes


if __name__ == "__main__":
    worker_main(sys.argv[1])
