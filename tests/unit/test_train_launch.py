"""A launched cell whose rank fails after rank 0 wrote the outcome keeps the measurement."""

import json
from pathlib import Path

from accelbench.bench import train_launch
from accelbench.bench.outcome import Outcome
from accelbench.bench.train_spec import TrainSpec
from accelbench.config.presets import get_preset
from accelbench.parallel.launch import LaunchResult

SPEC = TrainSpec(model=get_preset("gpt2-tiny"), seq_lens=(32,), micro_batches=(2,), gas=(1,),
                 dtypes=("fp32",), steps=2, warmup_steps=1, device="cpu", nproc=2)


def _fake_launch(write_outcome: bool, result: LaunchResult):
    """A stand-in for torchrun: rank 0 may have written its outcome before a rank failed."""
    def launch(nproc, argv, timeout_s, env=None, cwd=None):
        if write_outcome:
            done = Outcome("train", "ok", {"seq": 32}, {"tokens_per_s_global": 123.0})
            Path(argv[-1]).write_text(json.dumps(vars(done)))
        return result
    return launch


def _failed(timed_out: bool = False) -> LaunchResult:
    return LaunchResult(returncode=None if timed_out else -6, timed_out=timed_out, wall_s=1.0,
                        output="", failed_rank=1, error="terminate called")


def test_failure_after_the_outcome_keeps_it_with_a_note(monkeypatch):
    monkeypatch.setattr(train_launch, "launch_torchrun", _fake_launch(True, _failed()))
    outcome = train_launch.launch_cell(SPEC, SPEC.cells()[0])
    assert outcome.status == "ok" and outcome.metrics["tokens_per_s_global"] == 123.0
    assert "afterwards rank 1 failed: terminate called" in outcome.reason


def test_failure_before_the_outcome_is_an_error_record(monkeypatch):
    monkeypatch.setattr(train_launch, "launch_torchrun", _fake_launch(False, _failed()))
    outcome = train_launch.launch_cell(SPEC, SPEC.cells()[0])
    assert outcome.status == "error" and outcome.reason.startswith("rank 1: terminate called")


def test_timeout_before_the_outcome_is_a_timeout_record(monkeypatch):
    monkeypatch.setattr(train_launch, "launch_torchrun", _fake_launch(False, _failed(True)))
    assert train_launch.launch_cell(SPEC, SPEC.cells()[0]).status == "timeout"


def test_clean_launch_returns_the_outcome_unchanged(monkeypatch):
    ok = LaunchResult(returncode=0, timed_out=False, wall_s=1.0, output="")
    monkeypatch.setattr(train_launch, "launch_torchrun", _fake_launch(True, ok))
    outcome = train_launch.launch_cell(SPEC, SPEC.cells()[0])
    assert outcome.status == "ok" and outcome.reason == ""
