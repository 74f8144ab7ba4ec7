"""`accelbench sbatch` prints a runnable multi-node script for the given command."""

import sys

import pytest

from accelbench.cli.main import main


def test_sbatch_script_runs_the_command_under_torchrun(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["accelbench", "sbatch", "--nodes", "4", "--gpus-per-node",
                                      "8", "--", "train", "--model", "gpt2-medium",
                                      "--layout", "dp=8,tp=4"])
    with pytest.raises(SystemExit) as code:
        main()
    out = capsys.readouterr().out
    assert code.value.code == 0
    assert "#SBATCH --nodes=4" in out and "--nnodes=4 --nproc-per-node=8" in out
    assert out.rstrip().endswith(
        "-m accelbench train --model gpt2-medium --layout dp=8,tp=4")
