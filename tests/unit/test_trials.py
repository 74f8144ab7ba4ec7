"""Trials (bench/trials.py): cells interleaved round by round in a recorded seeded order, the
median of trials with its interval only from 6 trials, a failure ending its cell, a CPU hog
flagged, and the table's compact interval and disturbance mark."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.outcome import Outcome
from accelbench.bench.trial_record import combine_timed, disturbance_summary
from accelbench.bench.trials import CellTrials, interleave
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset
from accelbench.config.trial_count import parse_trials
from accelbench.hardware.disturbance import read_proc_stat
from accelbench.report.table import block_table, train_table
from accelbench.store.record import Record
from accelbench.workloads.block.runner import BlockSpec, run_block_sweep

# a known peak: no GEMM peak is measured for these sweeps
KNOWN = (SweepPeak("fp32", 1e12, "fp32", "test peak"),)


def _fake_cells(n: int, log: list, fail: dict[int, int] | None = None) -> list[CellTrials]:
    """n cells whose trial r takes 'time' 1 + r/10 (+ the cell's index): each call logged."""
    def run(i: int, r: int) -> Outcome:
        log.append((i, r))
        if (fail or {}).get(i) == r:
            return Outcome("block", "error", {"cell": i}, reason="boom")
        t = 1.0 + i + r / 10
        return Outcome("block", "ok", {"cell": i}, {"forward_time_s_median": t,
                                                     "forward_mfu": 0.5 / t})

    def finish(trials: list[Outcome]) -> Outcome:
        metrics, _ = combine_timed([o.metrics for o in trials],
                                   {"forward_time_s_median": ("forward_mfu",)})
        return Outcome("block", "ok", trials[0].spec, {**trials[0].metrics, **metrics})

    return [CellTrials(f"cell {i}", lambda r, i=i: run(i, r), finish) for i in range(n)]


def test_cells_are_interleaved_round_by_round_in_the_recorded_seeded_order():
    log, sunk, shown = [], [], []
    outcomes = interleave(_fake_cells(4, log), 6, seed=7, sink=sunk.append,
                          progress=lambda *a: shown.append(a), done_before=1)
    assert [a[:2] for a in shown] == [(k, 25) for k in range(1, 25)]  # started, of all
    assert shown[0][2].endswith("trial 1/6") and shown[-1][2].endswith("trial 6/6")
    rounds = [log[4 * r:4 * r + 4] for r in range(6)]
    for r, rd in enumerate(rounds):  # round r runs trial r of every cell, nothing else
        assert sorted(rd) == [(i, r) for i in range(4)]
    orders = [[i for i, _ in rd] for rd in rounds]
    assert len({tuple(o) for o in orders}) > 1  # shuffled, not one fixed order
    for o in outcomes:  # every record carries the whole order as it ran, and its places
        assert o.raw["trial_order"] == [[f"cell {i}" for i in order] for order in orders]
        i = o.spec["cell"]
        assert o.metrics["trial_positions"] == [order.index(i) for order in orders]
        assert o.metrics["trial_seed"] == 7 and o.metrics["trial_cells"] == 4
    assert [o.spec["cell"] for o in sunk] == [0, 1, 2, 3]  # sunk after the last round
    log2: list = []
    interleave(_fake_cells(4, log2), 6, seed=7, sink=lambda o: None)
    assert log2 == log  # the seed fixes the order


def test_a_cell_failing_in_a_trial_ends_there_and_the_others_go_on():
    log, sunk = [], []
    outcomes = interleave(_fake_cells(3, log, fail={1: 2}), 4, seed=0, sink=sunk.append)
    assert [(i, r) for i, r in log if i == 1] == [(1, 0), (1, 1), (1, 2)]
    assert outcomes[1].status == "error" and outcomes[1].raw["failed_trial"] == 2
    assert [o.status for o in outcomes] == ["ok", "error", "ok"]
    assert sunk[0] is outcomes[1]  # sunk at the end of its last round, before the others


def test_intervals_from_six_trials_and_none_below():
    six = [{"t": float(x), "rate": 12.0 / x} for x in (3, 1, 2, 6, 5, 4)]
    out, values = combine_timed(six, {"t": ("rate",)})
    assert out["t"] == 3.5 and out["rate"] == pytest.approx(12.0 / 3.5)  # numerator / median
    assert out["intervals"] == {"t": [1.0, 6.0], "rate": [2.0, 12.0]}
    assert values["t"] == [3.0, 1.0, 2.0, 6.0, 5.0, 4.0]
    out5, _ = combine_timed(six[:5], {"t": ("rate",)})
    assert out5["intervals"] == {"t": None, "rate": None} and out5["t"] == 3.0


def test_disturbance_summary_flags_any_disturbed_trial():
    quiet = {"disturbed": False, "reasons": [], "other_cpu_fraction": 0.02}
    busy = {"disturbed": True, "reasons": ["other processes used 40%"],
            "other_cpu_fraction": 0.4}
    summary = disturbance_summary([quiet, busy, None])
    assert summary == {"disturbed": True, "disturbed_trials": [1],
                       "disturbance_reasons": ["trial 2: other processes used 40%"],
                       "other_cpu_fraction_max": 0.4}
    assert disturbance_summary([None, {"disturbed": None}])["disturbed"] is None


@pytest.mark.parametrize("text", ["0", "-1", "nan", "2.5", "six", "", True, 0])
def test_bad_trials_are_refused_naming_trials(text):
    with pytest.raises(ConfigError) as err:
        parse_trials(text)
    assert err.value.field == "trials"


def test_auto_and_whole_numbers_are_trials():
    from accelbench.bench.trials import resolve_trials

    assert parse_trials("auto") is None and parse_trials("6") == 6 and parse_trials(3) == 3
    assert resolve_trials(None, torch.device("meta")) == 6  # an accelerator: an interval
    assert resolve_trials(4, torch.device("cpu")) == 4


def _block(trials: int, batches=(1, 2)) -> list[Outcome]:
    spec = BlockSpec(get_preset("gpt2-tiny"), seq_len=16, batches=batches, dtypes=("fp32",),
                     device="cpu", repeats=1, warmup=0, trials=trials, peaks=KNOWN)
    return run_block_sweep(spec, lambda o: None)


@pytest.mark.slow
def test_a_block_sweep_of_six_trials_has_intervals_and_its_order():
    outcomes = _block(6)
    for o in outcomes:
        m = o.metrics
        assert o.spec["trials"] == m["trials"] == 6
        low, high = m["intervals"]["forward_backward_time_s_median"]
        assert low <= m["forward_backward_time_s_median"] <= high
        low, high = m["intervals"]["forward_backward_tokens_per_s_per_device"]
        assert low <= m["forward_backward_tokens_per_s_per_device"] <= high
        assert m["interval_coverage"] == pytest.approx(1 - 2 / 64)
        assert sorted(o.raw["trials"]) == [f"trial{k}" for k in range(6)]
        assert len(o.raw["trial_values"]["forward_time_s_median"]) == 6
        assert all("disturbance" in t for t in o.raw["trials"].values())
        assert m["disturbed"] in (True, False)  # judged: /proc is readable here
    order = outcomes[0].raw["trial_order"]
    assert len(order) == 6 and all(sorted(rd) == ["batch 1 fp32", "batch 2 fp32"]
                                   for rd in order)


@pytest.mark.slow
def test_a_block_sweep_of_two_trials_says_too_few_for_an_interval():
    (o,) = _block(2, batches=(1,))
    m = o.metrics
    assert m["trials"] == 2 and m["interval_coverage"] is None
    assert set(m["intervals"].values()) == {None}
    assert m["interval_method"].startswith("too few samples")


# Starts the hogs and exits, so they are reparented away from our process tree: others' work
# (tests/unit/test_disturbance.py does the same).
LAUNCH = ("import subprocess, sys\n"
          "for _ in range(int(sys.argv[1])):\n"
          "    p = subprocess.Popen([sys.executable, '-c', 'while True: pass'],\n"
          "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
          "    print(p.pid, flush=True)\n")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_a_cpu_hog_beside_a_block_cell_gets_it_flagged_disturbed():
    n = read_proc_stat(Path("/proc/stat").read_text())[3]
    if n > 16 or len(os.sched_getaffinity(0)) < n:
        pytest.skip("fills every CPU /proc/stat lists: too many, or not all ours to fill")
    out = subprocess.run([sys.executable, "-c", LAUNCH, str(n)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    hogs = [int(pid) for pid in out.split()]
    try:
        time.sleep(0.5)  # the hogs are up and spinning
        spec = BlockSpec(get_preset("gpt2-tiny"), seq_len=64, batches=(4,), dtypes=("fp32",),
                         device="cpu", repeats=60, warmup=1, trials=1, peaks=KNOWN)
        (o,) = run_block_sweep(spec, lambda o: None)  # 60 repetitions: a window of 0.5 s
    finally:
        for pid in hogs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    window = o.raw["disturbance"]
    assert window["window_s"] > 0.2, window
    assert o.metrics["disturbed"] is True, window
    assert o.metrics["other_cpu_fraction_max"] > 0.10
    assert o.metrics["disturbance_reasons"][0].startswith("trial 1: other processes used")


@pytest.mark.slow
def test_a_training_sweep_interleaves_its_cells_and_keeps_every_trial():
    from accelbench.bench.train.sweep import run_train_sweep
    from accelbench.bench.train.train_options import TrainOptions, build_spec

    spec = build_spec(TrainOptions(model="gpt2-tiny", seq="16", micro_batch="1,2", dtype="fp32",
                                   steps=2, warmup_steps=1, device="cpu", trials="2", seed=3))
    sunk: list[Outcome] = []
    outcomes = run_train_sweep(spec.__class__(**{**spec.__dict__, "peaks": KNOWN}), sunk.append)
    assert [o.status for o in outcomes] == ["ok", "ok"] and sunk == outcomes
    labels = ["seq 16 mb 1 gas 1 fp32 recompute none", "seq 16 mb 2 gas 1 fp32 recompute none"]
    for o in outcomes:
        m = o.metrics
        assert o.spec["trials"] == m["trials"] == 2 and m["trial_seed"] == 3
        assert len(o.raw["trial_order"]) == 2 and all(sorted(rd) == labels
                                                       for rd in o.raw["trial_order"])
        assert set(m["intervals"].values()) == {None}  # 2 trials: too few, said so
        assert sorted(o.raw["trials"]) == ["trial0", "trial1"]
        assert o.raw["rank0"] == o.raw["trials"]["trial0"]["rank0"]  # the first at the top
        assert len(o.raw["rank0"]["step_times_s"]) == 2
        times = o.raw["trial_values"]["step_time_s_median"]
        assert m["step_time_s_median"] == pytest.approx(sum(times) / 2)
        assert m["tokens_per_s_global"] == pytest.approx(m["tokens_per_step_global"]
                                                         / m["step_time_s_median"])
        assert "disturbance" in o.raw["rank0"] and m["disturbed"] in (True, False)


def _record(kind: str, spec: dict, metrics: dict) -> Record:
    return Record(kind, "ok", spec, {}, metrics)


def test_tables_show_the_interval_the_mark_and_old_records_plainly(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    trial = {"trials": 6, "interval_coverage": 0.969, "disturbed": True,
             "other_cpu_fraction_max": 0.4, "tokens_per_s_global": 1000.0,
             "intervals": {"tokens_per_s_global": [980.0, 1030.0]},
             "forward_backward_tokens_per_s_per_device": 1000.0}
    old = {"tokens_per_s_global": 900.0, "forward_backward_tokens_per_s_per_device": 900.0}
    spec = {"seq_len": 16, "micro_batch": 1, "gas": 1, "dtype": "fp32", "batch": 1}
    from rich.console import Console

    for table in (train_table([_record("train", spec, trial), _record("train", spec, old)]),
                  block_table([_record("block", spec, {
                      **trial, "intervals": {"forward_backward_tokens_per_s_per_device":
                                             [500.0, 2000.0]}}),
                      _record("block", spec, old)])):
        console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        console.print(table)
        text = console.export_text()
        assert ("1,000 ±3.0%" in text) or ("1,000 [500-2,000]" in text), text
        assert "ok!" in text and " 900 " in text
        assert "median of 6 trial(s)" in text and "! disturbed" in text


def test_a_study_cell_spans_its_share_of_a_sweeps_trials():
    from accelbench.bench.recording.study_run import _Cells

    class View:
        def __init__(self) -> None:
            self.calls: list = []

        def cell(self, index: int, label: str) -> None:
            self.calls.append(("cell", index))

        def done(self, index: int, skipped: bool) -> None:
            self.calls.append(("done", index, skipped))

    view = View()
    cells = _Cells(view, offset=10, count=2, prefix="x: ")
    for started in range(6):  # 2 cells x 3 trials
        cells.start(started, 6, f"trial {started}")
    cells.end()
    assert [c for c in view.calls if c[0] == "done"] == [("done", 10, False), ("done", 11, False)]
    assert [c[1] for c in view.calls if c[0] == "cell"] == [10, 10, 10, 11, 11, 11]


def test_one_trial_runs_in_the_sweeps_order_and_sinks_each_cell_at_once():
    log: list = []
    seen: list = []
    interleave(_fake_cells(3, log), 1, seed=5, sink=lambda o: seen.append((o.spec["cell"],
                                                                           len(log))))
    assert log == [(0, 0), (1, 0), (2, 0)] and seen == [(0, 1), (1, 2), (2, 3)]
