"""Collective bus bandwidth and latency by message size over torch.distributed: the ranks are
launched with torchrun by `accelbench calibrate` itself (parallel/torchrun_launch.py), on this
node's devices (gloo on a CPU, nccl on GPUs: parallel/dist.py picks). Each repetition starts after a
barrier (untimed) and its time is the slowest rank's; sizes and bus bandwidth follow
nccl-tests (analytics/kernels.py)."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from accelbench.analytics.kernels import bus_factor, collective_elements
from accelbench.analytics.machine_profile import Point, curve_key, point_dict, point_from_dict
from accelbench.bench.timing import PhaseTimer, run_timed, summarize
from accelbench.parallel.dist import init_distributed, read_env, teardown
from accelbench.parallel.procs import watch_parent
from accelbench.parallel.rank_files import write_rank_error
from accelbench.workloads.calibrate.launched import JOB_FILE, launch_job
from accelbench.workloads.calibrate.options import FP32_BYTES, CalibrateSpec

POINTS_FILE = "points.json"


def _call(op: str, inp: torch.Tensor, out: torch.Tensor) -> Callable[[], object]:
    """One collective on this rank's buffers; send_recv pairs rank 2i (sends) with 2i+1
    (receives), and a rank without a partner waits only in the barrier."""
    rank, world = dist.get_rank(), dist.get_world_size()
    if op == "all_reduce":
        return lambda: dist.all_reduce(inp)
    if op == "all_gather":
        return lambda: dist.all_gather_into_tensor(out, inp)
    if op == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(out, inp)
    if op == "all_to_all":
        return lambda: dist.all_to_all_single(out, inp)
    if rank % 2 == 0 and rank + 1 < world:
        return lambda: dist.send(inp, rank + 1)
    if rank % 2 == 1:
        return lambda: dist.recv(out, rank - 1)
    return lambda: None


def _slowest_times_s(times_s: tuple[float, ...], device: torch.device) -> list[float]:
    """Each repetition's time on the slowest rank (a collective ends when its last rank does)."""
    t = torch.tensor(times_s, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def time_collective(op: str, message_bytes: int, device: torch.device, warmup: int,
                    repeats: int) -> Point:
    """One collective at one message size on the whole group, timed on every rank."""
    world = dist.get_world_size()
    n_in, n_out = collective_elements(op, message_bytes, FP32_BYTES, world)
    inp = torch.randn(n_in, device=device)
    out = torch.empty(n_out, device=device)
    call = _call(op, inp, out)

    def step(timer: PhaseTimer) -> None:
        dist.barrier()
        with timer.phase("call"):
            call()

    mine = run_timed(step, device, warmup, repeats)["call"]
    stats = summarize(_slowest_times_s(mine.times_s, device))
    size = FP32_BYTES * (n_out if op == "all_gather" else n_in)  # the nccl-tests size
    shape = {"collective": op, "ranks": world, "backend": dist.get_backend(),
             "algbw_bytes_per_s": size / stats.median_s}
    return Point("collective", curve_key("collective", op), f"{op} {size} B", "fp32", size,
                 size * bus_factor(op, world), stats.median_s, stats.min_s, stats.max_s,
                 stats.iqr_s, stats.count, shape)


def worker_main(folder: str) -> None:
    """A launched rank: every collective of <folder>/job.json at every size; rank 0 writes the
    points. An exception is written to the folder (the launcher names the rank) and raised."""
    work, rank = Path(folder), read_env().rank
    watch_parent(os.getppid(), signal.SIGKILL)  # an orphan has no one to report to
    job = json.loads((work / JOB_FILE).read_text())
    try:
        info, device = init_distributed(job["device_type"], timeout_s=job["timeout_s"])
        points = [time_collective(op, size, device, job["warmup"], job["repeats"])
                  for op in job["collectives"] for size in job["message_bytes"]]
        if info.rank == 0:
            (work / POINTS_FILE).write_text(json.dumps([point_dict(p) for p in points]))
        teardown(together=True)
    except BaseException as err:
        write_rank_error(work, rank, err)
        raise


def measure_collectives(spec: CalibrateSpec, device_type: str) -> tuple[list[Point], str]:
    """(points, reason): the collectives on spec.nproc launched ranks, or no points and why."""
    if spec.nproc < 2:
        return [], f"collectives need 2 processes, this {device_type} machine gives {spec.nproc}"
    job = {"device_type": device_type, "timeout_s": spec.timeout_s, "warmup": spec.warmup,
           "repeats": spec.repeats, "collectives": list(spec.collectives),
           "message_bytes": list(spec.message_bytes)}
    data, why = launch_job(__name__, spec.nproc, job, device_type, spec.timeout_s, POINTS_FILE)
    if data is None:
        return [], f"collectives failed on {spec.nproc} processes: {why}"[:2000]
    return [point_from_dict(d) for d in data], ""

if __name__ == "__main__":
    worker_main(sys.argv[1])
