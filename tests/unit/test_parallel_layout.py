"""Layout parsing and validation, Slurm/torchrun environment, result combining, launcher text,
the TP head reordering, and the communication/bubble arithmetic (single process, no group)."""

from __future__ import annotations

import pytest
import torch

from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset
from accelbench.parallel.collectives import (
    bubble_fraction_measured,
    bubble_fraction_theory,
    ideal_comm_bytes_per_step,
)
from accelbench.parallel.dist import first_slurm_host, read_env
from accelbench.parallel.gather import combine_rank_results
from accelbench.parallel.launch import failed_rank_from_output, sbatch_script
from accelbench.parallel.layout import Layout, parse_layout, validate_layout
from accelbench.parallel.tp import qkv_rank_order

TINY = get_preset("gpt2-tiny")  # 2 layers, 4 heads, hidden 128


def test_parse_layout_fields_and_defaults():
    assert parse_layout("dp=2,tp=2,pp=1,zero=3") == Layout(dp=2, tp=2, pp=1, zero=3)
    lay = parse_layout("pp=2, vp=2, sp=0")
    assert lay.pp_schedule == "interleaved_1f1b" and lay.world_size == 2
    assert parse_layout(lay.label()) == lay
    assert parse_layout("tp=2,sp=on,schedule=gpipe").sp is True


@pytest.mark.parametrize("text, field", [
    ("dp=x", "layout.dp"), ("dp=0", "layout.dp"), ("zero=4", "layout.zero"),
    ("foo=1", "layout"), ("sp=maybe", "layout.sp"), ("schedule=zb", "layout.schedule"),
])
def test_parse_layout_rejects(text, field):
    with pytest.raises(ConfigError) as err:
        parse_layout(text)
    assert err.value.field == field


@pytest.mark.parametrize("text, world, micro, field, words", [
    ("dp=2,tp=2", 2, 1, "layout", "world has 2"),
    ("tp=3", 3, 1, "layout.tp", "n_head=4"),
    ("pp=4", 4, 4, "layout.pp", "2 layers"),
    ("pp=2", 2, 1, "gas", "cannot fill 2"),
    ("pp=2,schedule=interleaved_1f1b", 2, 2, "layout.vp", "needs vp > 1"),
    ("pp=1,vp=2", 1, 2, "layout.vp", "needs pp > 1"),
    ("tp=1,sp=1", 1, 1, "layout.sp", "tp > 1"),
    ("dp=2,tp=2,zero=1", 4, 1, "layout.zero", "DTensor"),
    ("dp=2,pp=2,zero=1,tp=2", 8, 2, "layout.zero", "DTensor"),
])
def test_validate_layout_refuses(text, world, micro, field, words):
    with pytest.raises(ConfigError) as err:
        validate_layout(parse_layout(text), TINY, world, micro)
    assert err.value.field == field and words in str(err.value)


def test_validate_layout_accepts():
    cfg = TINY.with_changes(n_layer=4)
    for text, world, micro in (("dp=2,zero=1", 2, 1), ("dp=1,zero=1", 1, 1),
                               ("dp=2,tp=2,zero=3,sp=1", 4, 1), ("pp=2,vp=2", 2, 4),
                               ("dp=2,pp=2,zero=1", 4, 2), ("pp=2,zero=3", 2, 2),
                               ("dp=2,tp=2,pp=2,zero=3", 8, 2), ("dp=2,tp=2,pp=2", 8, 2),
                               ("tp=2,sp=1,pp=2", 4, 2), ("dp=2,tp=2", 4, 1)):
        assert validate_layout(parse_layout(text), cfg, world, micro).world_size == world
    with pytest.raises(ConfigError, match="multiple"):  # interleaved: rounds of pp
        validate_layout(parse_layout("pp=2,vp=2"), cfg, 2, 3)


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


def test_combine_never_averages_throughput():
    """2 dp x 2 tp ranks: 4096 tokens per dp replica; the slowest rank takes 2 s."""
    ranks = [{"tokens": 4096, "step_time_s": t, "mem_peak_bytes": m}
             for t, m in ((1.0, 10), (2.0, 30), (1.5, 20), (1.0, 5))]
    out = combine_rank_results(ranks, model_parallel_size=2)
    assert out["tokens_global"] == 8192
    assert out["step_time_s_median_max_rank"] == 2.0
    assert out["tokens_per_s_global"] == 4096  # 8192 / 2 s, not the mean rate
    assert out["tokens_per_s_per_device"] == 1024
    assert out["mem_peak_bytes_per_rank"] == [10, 30, 20, 5]
    assert out["mem_peak_bytes_max"] == 30


def test_failed_rank_from_torchrun_report():
    text = ("Failures:\n[1]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : -15\n"
            "Root Cause (first observed failure):\n[0]:\n  time : x\n"
            "  rank      : 3 (local_rank: 1)\n  exitcode  : 1 (pid: 9)\n")
    assert failed_rank_from_output(text) == 3
    assert failed_rank_from_output("no report") is None


def test_sbatch_script_uses_srun_and_rendezvous():
    text = sbatch_script(4, 8, ["-m", "accelbench.cli.main", "train", "--layout", "dp=32"],
                         partition="gpu")
    assert text.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1",
                 "#SBATCH --gpus-per-node=8", "#SBATCH --partition=gpu", "srun ",
                 "--nnodes=4 --nproc-per-node=8", "--rdzv-backend=c10d",
                 "-m accelbench.cli.main train --layout dp=32"):
        assert line in text


def test_qkv_order_gives_each_rank_whole_heads():
    """hidden 8, tp 2: rank 0 gets q[0:4], k[0:4], v[0:4] (rows 0-3, 8-11, 16-19)."""
    order = qkv_rank_order(8, 2).tolist()
    assert order[:12] == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19]
    assert sorted(order) == list(range(24))
    assert torch.equal(qkv_rank_order(8, 1), torch.arange(24))


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
