"""Launched cells: a rank that fails after rank 0 wrote the outcome keeps the measurement;
failed cells keep their layout; a rank out of memory is an oom; refused multi-process options.
When things go wrong (no processes: torchrun stood in for, heartbeats and pending folders made
by hand; tests/dist/test_lifecycle.py does the same with real ranks): the failed rank is named
with its own error, the watchdog names the rank that stopped, an interrupted cell is recorded
and the sweep says what was kept, a cell its dead parent left is recovered once."""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from accelbench.bench.outcome import Outcome
from accelbench.bench.recording.interrupted import SweepInterrupted
from accelbench.bench.recording.pending import recover
from accelbench.bench.recording.recorder import Recorder
from accelbench.bench.recording.session import SweepView, open_recorder, record_sweep
from accelbench.bench.train import launch as train_launch
from accelbench.bench.train.cell_folder import (
    LAUNCH_FILE,
    OUTCOME_FILE,
    TRIAL_KEY,
    open_cell_folder,
    recording_into,
)
from accelbench.bench.train.spec import TrainSpec, cell_layout
from accelbench.bench.train.sweep import check_sweep
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset
from accelbench.parallel.failure_cause import root_cause
from accelbench.parallel.procs import Interrupted, proc_state, signals_raise
from accelbench.parallel.torchrun_launch import LaunchResult
from accelbench.parallel.watchdog import HangWatch, HeartbeatWriter
from accelbench.store.store import ResultStore

SPEC = TrainSpec(model=get_preset("gpt2-tiny"), seq_lens=(32,), micro_batches=(2,), gas=(1,),
                 dtypes=("fp32",), steps=2, warmup_steps=1, device="cpu", nproc=2)


def _fake_launch(write_outcome: bool, result: LaunchResult, seen: list | None = None):
    """A stand-in for torchrun: rank 0 may have written its outcome before a rank failed."""
    def launch(nproc, argv, timeout_s, env=None, cwd=None, work_dir=None, hang_timeout_s=None):
        if write_outcome:
            done = Outcome("train", "ok", {"seq": 32}, {"tokens_per_s_global": 123.0})
            (Path(argv[-1]) / "outcome.json").write_text(json.dumps(vars(done)))
        if seen is not None:
            seen.append(Path(work_dir))
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

    def launch(nproc, argv, timeout_s, env=None, cwd=None, work_dir=None, hang_timeout_s=None):
        seen.update(json.loads((Path(argv[-1]) / "spec.json").read_text()))
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


def test_a_cell_its_ranks_would_refuse_is_refused_without_a_launch(monkeypatch):
    """Under a --mem-limit a rank's estimate exceeds, the record is the one the ranks would
    write (run_cell's refusal), made before any torchrun: a dry run's 0 s is then true."""
    def launch(*args, **kwargs):
        raise AssertionError("a refused cell was launched")

    monkeypatch.setattr(train_launch, "launch_torchrun", launch)
    small = replace(SPEC, mem_limit_bytes=2**20)
    outcome = train_launch.launch_cell(small, small.cells()[0])
    assert outcome.status == "oom" and outcome.reason.startswith("does not fit (user budget)")
    assert outcome.spec == train_launch.launched_cell_spec(small, small.cells()[0])
    assert outcome.typed.mem_estimate_bytes_per_rank > 2**20


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


# --- when things go wrong -----------------------------------------------------------------

REPORT = """Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 944)  (SIGTERM)
-----------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : {code} (pid: 945)  ({name})
"""
ECHO = {"rank": 0, "type": "RuntimeError", "time": 1.0,
        "message": "[../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]"}


def test_a_rank_is_named_with_its_own_exception_not_its_peers_echo():
    """Rank 1 raised; rank 0's 'connection closed' came first in time but is only the echo;
    rank 1's exit status (SIGABRT at teardown) says less than its exception."""
    boom = {"rank": 1, "type": "RuntimeError", "message": "boom", "time": 2.0}
    output = REPORT.format(code=-6, name="SIGABRT")
    assert root_cause(output, {}, {0: ECHO, 1: boom}) == (1, "RuntimeError: boom")


def test_a_rank_killed_by_a_signal_is_named_with_it():
    """No exception of its own (SIGKILL gives none); the peer's echo and torchrun's SIGTERM of
    the survivor are not causes."""
    output = REPORT.format(code=-9, name="SIGKILL")
    rank, error = root_cause(output, {1: "profiler_stop\n", 0: "noise"}, {0: ECHO})
    assert rank == 1 and error.startswith("killed by SIGKILL (signal 9)")
    assert "profiler" not in error and "noise" not in error


def test_the_watchdog_names_the_rank_that_stopped_first(tmp_path):
    beats = tmp_path / "heartbeat"
    one, zero = HeartbeatWriter(beats, 1), HeartbeatWriter(beats, 0)
    one(2, "data")
    time.sleep(0.02)
    zero(2, "forward/backward")
    start = time.monotonic()
    watch = HangWatch(beats, 2, hang_timeout_s=5)
    assert watch.check(start) is None and watch.check(start + 4) is None
    hang = watch.check(start + 6)
    assert hang is not None and hang.rank == 1
    assert hang.reason.startswith("hung: no rank made progress for 6 s (hang timeout 5 s); "
                                  "rank 1, last heartbeat 'step 2: data'")
    assert "rank 0, last heartbeat 'step 2: forward/backward'" in hang.reason
    zero(3, "data")  # a heartbeat that advances is progress again
    assert watch.check(start + 7) is None
    watch = HangWatch(beats, 3, 5)  # rank 2 never beats: judged from the watch's start
    assert watch.check(start + 60) is None  # ranks 0 and 1: first seen now, progress
    hang = watch.check(start + 66)
    assert hang is not None and hang.rank == 2  # the one that never beat, before the oldest
    assert hang.reason.startswith("hung: no rank made progress for 6 s (hang timeout 5 s); "
                                  "rank 2 (process not found), no heartbeat in the ")


def test_a_rank_stopped_before_its_first_heartbeat_is_a_hang_named_with_its_state(tmp_path):
    """A real process of the 'agent' (this test) with RANK=1 that stops itself before writing a
    heartbeat; rank 0 beats once and waits. No verdict while the ranks progress; then rank 1,
    stopped, is named first, counted from the watch's start."""
    beats = tmp_path / "heartbeat"
    HeartbeatWriter(beats, 0)(0, "starting")
    child = subprocess.Popen([sys.executable, "-c", "import os, signal; "
                              "os.kill(os.getpid(), signal.SIGSTOP)"],
                             env={**os.environ, "RANK": "1"})
    try:
        watch = HangWatch(beats, 2, hang_timeout_s=3, agent_pid=os.getpid())
        start = watch.started
        while proc_state(child.pid) != "T":
            time.sleep(0.01)
        assert watch.check(start + 1) is None
        hang = watch.check(start + 4.5)
        assert hang is not None and hang.rank == 1, watch.ranks
        assert "rank 1 (process stopped), no heartbeat in the 4 s since the launch" in hang.reason
        assert "rank 0, last heartbeat 'starting'" in hang.reason
    finally:
        child.kill()
        child.wait()


def test_a_failed_launchs_reason_is_its_own_error_never_other_log_lines():
    """No report, no error file: the reason is the log's exception line, else says there was
    none; a killed or signalled agent is named with its signal."""
    from accelbench.parallel.torchrun_launch import _result

    log = "profiler_stop\nSTAGE:2026 ActivityProfilerController.cpp:312] Completed Stage\n"
    rank, error = root_cause(REPORT.format(code=1, name="x"), {1: log}, {})
    assert rank == 1 and error == "exited with code 1, with no error message of its own in its log"
    rank, error = root_cause("", {}, {})
    assert "profiler" not in error and "Stage" not in error
    _, error = root_cause(REPORT.format(code=1, name="x"),
                          {1: log + "Traceback ...\nValueError: bad shape\nprofiler_stop\n"}, {})
    assert error == "ValueError: bad shape"
    killed = _result(-9, 1.0, "STAGE:2026 profiler line\n", {0: log}, {})
    assert killed.error == ("the torchrun agent was killed by SIGKILL (signal 9), sent by another "
                            "process; its ranks ended with it") and killed.failed_rank is None
    termed = _result(1, 1.0, "torch.distributed.elastic.multiprocessing.api.SignalException: "
                     "Process 77 got signal: 15\n", {}, {})
    assert termed.error.startswith("the torchrun agent received SIGTERM (signal 15)")


def test_signals_raise_turns_sigterm_into_interrupted_once():
    with pytest.raises(Interrupted) as caught, signals_raise():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert caught.value.signum == signal.SIGTERM and caught.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def _interrupted(**_):
    return LaunchResult(None, False, 3.0, "", error="interrupted by SIGINT after 3.0 s",
                        interrupted=signal.SIGINT)


def test_an_interrupted_cell_raises_with_its_interrupted_outcome(monkeypatch, tmp_path):
    monkeypatch.setattr(train_launch, "launch_torchrun", _fake_launch(False, _interrupted()))
    spec = replace(SPEC, layout="tp=2")
    with pytest.raises(train_launch.CellInterrupted) as caught:
        train_launch.launch_cell(spec, spec.cells()[0])
    outcome = caught.value.outcome
    assert outcome.status == "interrupted" and outcome.reason.startswith("interrupted by SIGINT")
    assert outcome.spec["layout"]["tp"] == 2 and caught.value.exit_code == 130


def test_cell_folders_last_until_the_outcome_is_recorded(monkeypatch, tmp_path):
    ok = LaunchResult(returncode=0, timed_out=False, wall_s=1.0, output="")
    folders: list[Path] = []
    monkeypatch.setattr(train_launch, "launch_torchrun", _fake_launch(True, ok, folders))
    train_launch.launch_cell(SPEC, SPEC.cells()[0])  # no session: nothing would recover it
    assert not folders[0].exists()
    with recording_into(str(tmp_path / "r.db"), {}, "run1"):
        train_launch.launch_cell(SPEC, SPEC.cells()[0])
        assert folders[1].exists() and folders[1].parent == tmp_path / "accelbench-pending"
        train_launch.launch_cell(SPEC, SPEC.cells()[0])  # the next cell: the first is recorded
        assert not folders[1].exists() and folders[2].exists()
    assert not folders[2].exists()


def _reaped() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _left_behind(db: Path, outcome: Outcome | None, **parent) -> Path:
    """A cell folder as an accelbench process that died would leave it."""
    env = {"device_name": "test cpu", "device_type": "cpu"}
    with recording_into(str(db), env, "deadrun"):
        folder = open_cell_folder({}, {"workload": "train", "seq_len": 32}, "seq 32")
    folder.mkdir(exist_ok=True)
    meta = json.loads((folder / LAUNCH_FILE).read_text())
    meta["parent"].update({"pid": _reaped(), "start_ticks": None, **parent})
    (folder / LAUNCH_FILE).write_text(json.dumps(meta))
    if outcome is not None:
        (folder / OUTCOME_FILE).write_text(json.dumps(vars(outcome)))
    return folder


def test_a_cell_finished_after_its_parent_died_is_recovered_once(tmp_path):
    db = tmp_path / "r.db"
    done = Outcome("train", "ok", {"workload": "train", "seq_len": 32},
                   {"tokens_per_s_global": 5.0})
    folder = _left_behind(db, done)
    store = ResultStore(db)
    [record] = recover(store)
    assert (record.status, record.run_id, record.metrics["tokens_per_s_global"]) == (
        "ok", "deadrun", 5.0)
    assert record.environment["device_name"] == "test cpu"
    assert "finished after the accelbench process" in record.reason
    assert not folder.exists() and recover(store) == []
    assert len(store.query(kind="train")) == 1


def test_a_cell_its_parent_died_in_is_recorded_interrupted(tmp_path):
    db = tmp_path / "r.db"
    folder = _left_behind(db, None)
    [record] = recover(ResultStore(db))
    assert record.status == "interrupted" and record.spec["seq_len"] == 32
    assert "died during it" in record.reason and not folder.exists()


def test_recovery_leaves_live_and_foreign_launches_and_never_stores_twice(tmp_path):
    db = tmp_path / "r.db"
    store = ResultStore(db)
    alive = _left_behind(db, None, pid=os.getpid(), start_ticks=None)
    foreign = _left_behind(db, None, host="another-host")
    done = Outcome("train", "ok", {"workload": "train", "seq_len": 32}, {})
    stored = _left_behind(db, done)
    Recorder(store, {"device_name": "test cpu"}, "deadrun")(done)  # stored before it died
    assert recover(store) == []
    assert alive.exists() and foreign.exists() and not stored.exists()
    assert len(store.query(kind="train")) == 1


def test_a_sweep_stopped_by_a_signal_says_what_it_kept(tmp_path):
    db = tmp_path / "r.db"
    left = _left_behind(db, None)
    notes: list[str] = []
    view = SweepView(banner=lambda text: None, cell=lambda i, n, label: None, step=None,
                     failed=lambda record: None, note=notes.append)

    def sweep(sink, step, cell, skip):
        cell(0, 3, "first")
        sink(Outcome("train", "ok", {"workload": "train", "seq_len": 16}))
        cell(1, 3, "second")
        raise train_launch.CellInterrupted(
            signal.SIGINT, Outcome("train", "interrupted", {"workload": "train", "seq_len": 32},
                                   reason="interrupted by SIGINT"))

    recorder = open_recorder(db, "cpu")
    with pytest.raises(SweepInterrupted) as caught:
        record_sweep(sweep, recorder, view, "t")
    assert caught.value.exit_code == 130
    assert caught.value.line == (f"interrupted by SIGINT: 1 finished cell(s) and 1 "
                                 "interrupted cell(s) with 0 of their 1 trial(s) recorded in "
                                 f"{db}; lost: the running launch of cell 2/3 (second)")
    assert notes[0].startswith("recovered: a train cell of run deadrun") and not left.exists()
    assert [r.status for r in ResultStore(db).query(kind="train")] == [
        "interrupted", "ok", "interrupted"]

    def killed(sink, step, cell, skip):  # a real SIGTERM, outside any launch
        cell(0, 1, "only")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)

    with pytest.raises(SweepInterrupted) as caught:
        record_sweep(killed, open_recorder(db, "cpu"), view, "t")
    assert caught.value.exit_code == 143
    assert caught.value.line.endswith("lost: cell 1/1 (only), which was running in this "
                                      "process")


def _launched_trial(times: dict, launches: list):
    """A stand-in for launch_cell: rank 0's outcome of two ranks, each trial's step time taken
    in turn from `times[micro_batch]` (no processes)."""
    def launch(spec, cell, trial=None):
        launches.append((cell.micro_batch, trial))
        step = times[cell.micro_batch].pop(0)
        tokens = cell.micro_batch * cell.seq_len * 2
        metrics = {"tokens_per_step_global": tokens, "step_time_s_median": step,
                   "tokens_per_s_global": tokens / step, "n_devices": 2,
                   "step_time_s_median_per_rank": [step * 0.9, step],
                   "step_time_slowest_rank": 1, "step_time_s_min": step / 2,
                   "step_time_s_max": step * 2, "step_time_s_iqr": 0.01}
        spec_out = train_launch.launched_cell_spec(spec, cell)
        return Outcome("train", "ok", spec_out, metrics,
                       raw={"rank0": {"disturbance": {"disturbed": False}}})
    return launch


def test_launched_cells_run_trials_interleaved_as_one_process_cells(monkeypatch):
    """--nproc 2 --trials 3 over two cells: each trial a launch, both cells in every round, the
    record rank 0's trials combined (median step, per-rank medians, per-trial values)."""
    launches: list = []
    times = {1: [0.3, 0.1, 0.2], 2: [0.5, 0.4, 0.6]}
    monkeypatch.setattr(train_launch, "launch_cell", _launched_trial(times, launches))
    monkeypatch.setattr(train_launch, "with_launch_peaks", lambda spec, sink: spec)
    sunk: list = []
    spec = replace(SPEC, micro_batches=(1, 2), trials=3)
    outcomes = train_launch.run_launched_sweep(spec, sunk.append)
    assert sorted(launches) == [(mb, (r, 3)) for mb in (1, 2) for r in range(3)]
    assert [{mb for mb, _ in launches[2 * r:2 * r + 2]} for r in range(3)] == [{1, 2}] * 3
    one = outcomes[0].typed
    assert one.trials == 3 and one.step_time_s_median == 0.2 and one.trial_cells == 2
    assert one.tokens_per_s_global == pytest.approx(64 / 0.2)
    assert one.step_time_s_median_per_rank == pytest.approx([0.18, 0.2])
    assert one.step_time_slowest_rank == 1 and len(one.trial_positions) == 3
    assert outcomes[0].raw["trial_values"]["step_time_s_median"] == [0.3, 0.1, 0.2]
    assert len(outcomes[0].raw["trial_order"]) == 3 and outcomes[0].spec["trials"] == 3
    assert [o.spec["micro_batch"] for o in sunk] == [1, 2] and one.disturbed is False


def test_one_launched_trial_is_recorded_as_a_one_process_cell_of_one_trial(monkeypatch):
    """One launch, no trial marker on it; the record carries what a one-process cell of one
    trial carries (the same interleave): trials 1, no interval, no round order in raw."""
    launches: list = []
    monkeypatch.setattr(train_launch, "launch_cell", _launched_trial({2: [0.3]}, launches))
    monkeypatch.setattr(train_launch, "with_launch_peaks", lambda spec, sink: spec)
    sunk: list = []
    [outcome] = train_launch.run_launched_sweep(replace(SPEC, trials=1), sunk.append)
    assert launches == [(2, None)] and sunk == [outcome]
    one = outcome.typed
    assert one.trials == 1 and one.trial_positions == [0] and one.trial_cells == 1
    assert not (one.intervals or {}).get("tokens_per_s_global") and one.step_time_s_median == 0.3
    assert "trial_order" not in outcome.raw and "trial_values" not in outcome.raw


def test_a_trial_its_parent_died_in_is_recorded_interrupted_whatever_it_holds(tmp_path):
    """One trial of several is not the cell: recovered as interrupted, so resume runs it (only
    its missing trials: the finished ones are kept apart, tests/unit/test_trials_kept.py)."""
    db = tmp_path / "r.db"
    folder = _left_behind(db, Outcome("train", "ok", {"workload": "train", "seq_len": 32},
                                      {"tokens_per_s_global": 5.0}))
    meta = json.loads((folder / LAUNCH_FILE).read_text())
    (folder / LAUNCH_FILE).write_text(json.dumps({**meta, TRIAL_KEY: [1, 3]}))
    [record] = recover(ResultStore(db))
    assert record.status == "interrupted" and "trial 2 of 3" in record.reason


def test_trials_under_a_users_torchrun_are_refused(monkeypatch):
    """Under torchrun/srun the one group runs a cell once: a trial needs its own launch."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    with pytest.raises(ConfigError, match="trials: 3 trials under torchrun or srun"):
        check_sweep(replace(SPEC, trials=3))


def test_a_rank_error_never_makes_a_removed_cell_folder_again(tmp_path):
    """A rank outliving its killed agent writes its error after the launcher recorded the cell
    and removed its folder: nothing is written and no folder is made again (a left cell folder
    would be recovered as a cell that never ended); into a live folder the error is written."""
    from accelbench.parallel.rank_files import write_rank_error

    gone = tmp_path / "cell-gone"
    write_rank_error(gone, 1, RuntimeError("Connection closed by peer"))
    assert not gone.exists()
    live = tmp_path / "cell-live"
    live.mkdir()
    write_rank_error(live, 1, RuntimeError("boom"))
    assert [p.name for p in (live / "errors").iterdir()] == ["rank-1.json"]
