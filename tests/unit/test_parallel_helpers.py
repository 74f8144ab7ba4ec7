"""Slurm/torchrun environment, launcher text, the TP head reordering, and the
communication/bubble arithmetic (single process, no group). Layouts: tests/unit/test_layout.py."""

from __future__ import annotations

import pytest
import torch

from accelbench.config.layout import Layout
from accelbench.config.presets import get_preset
from accelbench.parallel.bubble import bubble_fraction_measured, bubble_fraction_theory
from accelbench.parallel.dist import first_slurm_host, read_env
from accelbench.parallel.failure_cause import failed_rank_from_output
from accelbench.parallel.ideal_comm import ideal_comm_bytes_per_step
from accelbench.parallel.rank_params import kv_share
from accelbench.parallel.slurm import SlurmJob, sbatch_script
from accelbench.parallel.tp import gate_up_rank_order, qkv_rank_order

TINY = get_preset("gpt2-tiny")  # 2 layers, 4 heads, hidden 128


def test_environment_from_torchrun_and_slurm():
    env = read_env({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "n1",
                    "MASTER_PORT": "1234"})
    assert (env.rank, env.world_size, env.local_rank, env.master_addr, env.master_port,
            env.launcher) == (3, 8, 1, "n1", 1234, "torchrun")
    env = read_env({"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1",
                    "SLURM_NODELIST": "gpu[003-005,009]"})
    assert (env.rank, env.world_size, env.local_rank, env.master_addr,
            env.launcher) == (5, 16, 1, "gpu003", "slurm")
    assert read_env({}).world_size == 1
    assert first_slurm_host("nodeA,nodeB") == "nodeA"
    assert first_slurm_host("x[7,9]") == "x7"


def test_failed_rank_from_torchrun_report():
    text = ("Failures:\n[1]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : -15\n"
            "Root Cause (first observed failure):\n[0]:\n  time : x\n"
            "  rank      : 3 (local_rank: 1)\n  exitcode  : 1 (pid: 9)\n")
    assert failed_rank_from_output(text) == 3
    assert failed_rank_from_output("no report") is None


def test_sbatch_script_uses_srun_and_rendezvous():
    job = SlurmJob(4, 8, ["-m", "accelbench", "train", "--layout", "dp=32"], gpus_per_node=8,
                   cpus_per_task=64, python="/opt/env/bin/python", workdir="/shared/run",
                   log_dir="/shared/logs", partition="gpu")
    text = sbatch_script(job)
    assert text.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=64",
                 "#SBATCH --gpus-per-node=8", "#SBATCH --partition=gpu",
                 "#SBATCH --chdir=/shared/run", "#SBATCH --output=/shared/logs/%x-%j.out",
                 "#SBATCH --error=/shared/logs/%x-%j.err",
                 "srun --kill-on-bad-exit=1 --ntasks-per-node=1 "
                 "--cpus-per-task=$SLURM_CPUS_PER_TASK",
                 "/opt/env/bin/python -m torch.distributed.run",
                 "--nnodes=4 --nproc-per-node=8", "--rdzv-backend=c10d",
                 "-m accelbench train --layout dp=32"):
        assert line in text
    cpu = sbatch_script(SlurmJob(1, 2, ["-m", "accelbench", "train"]))
    assert "--gpus-per-node" not in cpu and "#SBATCH --cpus-per-task=1" in cpu


def test_qkv_order_gives_each_rank_whole_heads():
    """hidden 8 (2 heads of 4), tp 2: rank 0 gets q[0:4], k[0:4], v[0:4] (rows 0-3, 8-11,
    16-19)."""
    order = qkv_rank_order(2, 2, 4, 2).tolist()
    assert order[:12] == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19]
    assert sorted(order) == list(range(24))
    assert torch.equal(qkv_rank_order(2, 2, 4, 1), torch.arange(24))


def test_qkv_order_of_grouped_query_heads():
    """4 query heads of 2 rows (q rows 0-7), 2 key/value heads (k rows 8-11, v rows 12-15).
    tp 2 divides the kv heads: rank 0 gets q heads 0-1, k head 0, v head 0. tp 4: ranks 0 and
    1 share kv head 0, each holding half of its [k | v] rows (k 8-9 | v 12-13)."""
    split = qkv_rank_order(4, 2, 2, 2).tolist()
    assert split[:8] == [0, 1, 2, 3, 8, 9, 12, 13]
    assert split[8:] == [4, 5, 6, 7, 10, 11, 14, 15]
    shared = qkv_rank_order(4, 2, 2, 4).tolist()
    assert [shared[i:i + 4] for i in range(0, 16, 4)] == [
        [0, 1, 8, 9], [2, 3, 12, 13], [4, 5, 10, 11], [6, 7, 14, 15]]
    assert kv_share(2, 4) == 2 and kv_share(2, 2) == 1 and kv_share(8, 2) == 1
    assert gate_up_rank_order(4, 2).tolist() == [0, 1, 4, 5, 2, 3, 6, 7]


def test_bubble_theory_and_measure():
    assert bubble_fraction_theory(4, 8) == pytest.approx(3 / 8)
    assert bubble_fraction_theory(4, 8, vp=2) == pytest.approx(3 / 16)
    # GPipe with p=4, m=8: (m + p - 1) slots of t/p against m: 11/8 - 1 = 3/8
    assert bubble_fraction_measured(11 / 8 * 1.0 / 4 * 4, 4.0, 4) == pytest.approx(3 / 8)


def test_ideal_comm_bytes_by_hand():
    """Megatron's ideal volumes (the planner's): gpt2-tiny, seq 32, micro-batch 2, 4
    micro-batches, fp32."""
    act = 32 * 2 * 128 * 4  # one b*s*h message: 32768 bytes
    out = ideal_comm_bytes_per_step(TINY, Layout(tp=2), 32, 2, 4, "fp32", 0.0)
    assert out["tp_bytes_per_step"] == 4 * act * 1 * 2 * 4  # 4 all-reduces of 2(n-1)/n, 2 layers
    out = ideal_comm_bytes_per_step(TINY, Layout(pp=2), 32, 2, 4, "fp32", 0.0)
    assert out["pp_bytes_per_step"] == act * 2 * 4
    out = ideal_comm_bytes_per_step(TINY, Layout(tp=2, pp=2, sp=True), 32, 2, 4, "fp32", 0.0)
    assert out["pp_bytes_per_step"] == act / 2 * 2 * 4  # each tp rank sends its sequence half
    out = ideal_comm_bytes_per_step(TINY, Layout(dp=4, zero=3), 32, 2, 4, "fp32", 1000.0)
    assert out["dp_bytes_per_step"] == pytest.approx(3 * 750 * 4)
    assert out["comm_bytes_per_step"] == out["dp_bytes_per_step"]
