"""Launched cells: a rank that fails after rank 0 wrote the outcome keeps the measurement;
failed cells keep their layout; a rank out of memory is an oom; refused multi-process options."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from accelbench.bench.outcome import Outcome
from accelbench.bench.train import launch as train_launch
from accelbench.bench.train.spec import TrainSpec, cell_layout
from accelbench.config.errors import ConfigError
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


def test_a_failed_cell_records_its_layout_and_world_size(monkeypatch):
    """`train --nproc 2 --layout tp=2` that times out is stored as tp=2 on 2 processes."""
    monkeypatch.setattr(train_launch, "launch_torchrun", _fake_launch(False, _failed(True)))
    spec = replace(SPEC, layout="tp=2")
    outcome = train_launch.launch_cell(spec, spec.cells()[0])
    assert outcome.status == "timeout"
    assert (outcome.spec["layout"]["tp"], outcome.spec["layout"]["dp"]) == (2, 1)
    assert outcome.spec["world_size"] == 2 and outcome.spec["nproc"] == 2


def test_the_launched_ranks_get_the_real_process_count(monkeypatch):
    """Rank 0 records the spec it was given: nproc must be the launch's, not 1."""
    seen = {}

    def launch(nproc, argv, timeout_s, env=None, cwd=None):
        seen.update(json.loads(Path(argv[-2]).read_text()))
        return LaunchResult(returncode=0, timed_out=False, wall_s=1.0, output="")

    monkeypatch.setattr(train_launch, "launch_torchrun", launch)
    train_launch.launch_cell(SPEC, SPEC.cells()[0])
    assert seen["nproc"] == 2


def test_a_rank_out_of_memory_is_an_oom_record(monkeypatch):
    oom = LaunchResult(returncode=1, timed_out=False, wall_s=1.0, output="", failed_rank=1,
                       error="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB")
    monkeypatch.setattr(train_launch, "launch_torchrun", _fake_launch(False, oom))
    outcome = train_launch.launch_cell(SPEC, SPEC.cells()[0])
    assert outcome.status == "oom" and "rank 1" in outcome.reason


@pytest.mark.parametrize("changes, field", [
    ({"max_micro_batch": True}, "max-micro-batch"),
    ({"dtypes": ("fp16",), "layout": "tp=2"}, "dtype"),
    ({"dtypes": ("bf16", "fp16"), "layout": "pp=2", "gas": (2,)}, "dtype"),
])
def test_options_several_processes_cannot_honour_are_refused(changes, field):
    spec = replace(SPEC, **changes)
    with pytest.raises(ConfigError, match=f"^{field}:"):
        cell_layout(spec, 2, spec.gas[0])


def test_fp16_on_data_parallel_and_one_process_options_pass():
    fp16 = replace(SPEC, dtypes=("fp16",), layout="dp=2,zero=3")
    assert cell_layout(fp16, 2, 1).zero == 3
    search = replace(SPEC, max_micro_batch=True, nproc=1, layout="dp=1")
    assert cell_layout(search, 1, 1).dp == 1  # one process: the search runs
