"""`accelbench sbatch`'s script, submitted as written to a real Slurm: a single-host cluster
(munged, slurmctld and slurmd started here, tests/dist/local_slurm.py) runs a tiny training cell
on two ranks through sbatch -> srun -> torchrun, and rank 0's record is in the database.
Skipped, with the reason, where Slurm cannot start (not installed, not root)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from accelbench.store.store import ResultStore
from tests.dist import local_slurm

# one 2-rank launch at a time, beside the "dist" group's launches (tests/conftest.py)
pytestmark = [pytest.mark.dist, pytest.mark.xdist_group("dist-2ranks")]
JOB_LIMIT_S = 300


@pytest.fixture
def slurm():
    """A running local Slurm (short paths: munge's socket name must fit a sockaddr)."""
    folder = Path(tempfile.mkdtemp(prefix="ab-slurm-", dir="/tmp"))
    try:
        cluster = local_slurm.start(folder)
    except local_slurm.Unavailable as why:
        pytest.skip(str(why))
    yield cluster
    cluster.stop()
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def _script(tmp_path: Path, port: int) -> str:
    """The script `accelbench sbatch` writes for a two-rank cell on one CPU node."""
    argv = [sys.executable, "-m", "accelbench", "sbatch", "--nodes", "1", "--gpus-per-node",
            "0", "--cpus-per-task", str(min(2, os.cpu_count() or 1)), "--log-dir", "logs",
            "--job-name", "abtest", "--port", str(port), "--time", "10", "--", "train",
            "--model", "gpt2-tiny:n_layer=2,vocab_size=1024,n_positions=64", "--seq", "16",
            "--steps", "3", "--warmup-steps", "1", "--dtype", "fp32", "--device", "cpu",
            "--layout", "dp=2", "--nproc", "2", "--quiet", "--db", "results.db"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_sbatch_script_runs_as_written_and_rank_0_records_the_cell(slurm, tmp_path):
    text = _script(tmp_path, local_slurm._free_port())
    assert f"{sys.executable} -m torch.distributed.run" in text and "--nproc-per-node=2" in text
    (tmp_path / "job.sh").write_text(text)
    job = slurm.run("sbatch", "--parsable", str(tmp_path / "job.sh")).strip().split(";")[0]
    start = time.monotonic()
    while (state := slurm.job_state(job)) in ("PENDING", "CONFIGURING", "RUNNING",
                                              "COMPLETING"):
        assert time.monotonic() - start < JOB_LIMIT_S, f"job {job} still {state}"
        time.sleep(1)
    out = tmp_path / "logs" / f"abtest-{job}.out"
    err = tmp_path / "logs" / f"abtest-{job}.err"
    assert state == "COMPLETED", err.read_text()[-3000:] if err.exists() else state
    records = ResultStore(tmp_path / "results.db").query(kind="train")
    assert [r.status for r in records] == ["ok"]  # once: rank 0 is the one writer
    record = records[0]
    assert record.spec["world_size"] == 2 and record.metrics["n_nodes"] == 1
    assert record.metrics["ranks_per_node"] == [2]
    assert record.metrics["collectives_cross_node"] == []
    assert "train" in out.read_text()  # rank 0's table, in the job's output file
