"""`accelbench sbatch` prints a runnable multi-node script for the given command."""

import sys

import pytest

from accelbench.cli.main import main


def _sbatch(monkeypatch, capsys, *args: str) -> str:
    monkeypatch.setattr(sys, "argv", ["accelbench", "sbatch", *args])
    with pytest.raises(SystemExit) as code:
        main()
    assert code.value.code == 0
    return capsys.readouterr().out


def test_sbatch_script_runs_the_command_under_torchrun(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    out = _sbatch(monkeypatch, capsys, "--nodes", "4", "--gpus-per-node", "8", "--", "train",
                  "--model", "gpt2-medium", "--layout", "dp=8,tp=4", "--nproc", "32")
    assert "#SBATCH --nodes=4" in out and "--nnodes=4 --nproc-per-node=8" in out
    assert f"    {sys.executable} -m torch.distributed.run" in out
    assert f"#SBATCH --chdir={tmp_path}" in out and "#SBATCH --cpus-per-task=8" in out
    assert f"#SBATCH --output={tmp_path}/accelbench-logs/%x-%j.out" in out
    assert (tmp_path / "accelbench-logs").is_dir()  # Slurm opens the files before the script
    assert out.rstrip().endswith(  # --nproc honoured (4 x 8), then left to the script
        f"-m accelbench train --model gpt2-medium --layout dp=8,tp=4 --db {tmp_path}/results.db")


def test_cpu_nodes_split_nproc_and_make_the_db_absolute(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    out = _sbatch(monkeypatch, capsys, "--nodes", "2", "--gpus-per-node", "0",
                  "--cpus-per-task", "4", "--log-dir", "logs", "--", "train", "--nproc=4",
                  "--db", "runs/r.db", "--seq", "16")
    assert "--gpus-per-node" not in out and "--nnodes=2 --nproc-per-node=2" in out
    assert "#SBATCH --cpus-per-task=4" in out and f"--error={tmp_path}/logs/%x-%j.err" in out
    assert out.rstrip().endswith(f"train --seq 16 --db {tmp_path}/runs/r.db")
