"""A study's progress lines are numbered in the order cells run ('[15/33]' then '[16/33]', never
a jump where a sweep closed cells it did not start), its total the cells that will run, and
its ETA counts every trial: a cell's estimate is over all its trials (bench/study_planner.py), so a
study of 4 trials a cell is estimated at twice one of 2."""

from __future__ import annotations

import pytest

from accelbench.report.cell_lines import StudyLines


def test_cells_are_numbered_in_the_order_they_run():
    now, lines = [0.0], []
    study = StudyLines([10.0] * 6, lines.append, clock=lambda: now[0])
    for index in (0, 1):
        study.cell(index, f"cell {index}")
        now[0] += 10.0
        study.done(index, False)
    study.done(3, True)  # a sweep's cell it never started, closed as skipped: no line, no jump
    study.done(2, True)
    study.cell(5, "cell 5")  # another sweep's cell, out of index order
    now[0] += 10.0
    study.done(5, False)
    study.done(5, False)  # closed twice: counted once
    assert [line.split(" ...")[0] for line in lines] == [
        "[1/6] cell 0", "[2/6] cell 1", "[3/4] cell 5"]
    assert lines[-1].endswith("ETA 10.0 s")  # one 10 s cell left, cells take their estimate


def test_the_eta_scales_by_how_the_cells_run_took_against_their_estimates():
    now, lines = [0.0], []
    study = StudyLines([10.0, 30.0, 60.0], lines.append, clock=lambda: now[0])
    study.cell(0, "a")
    now[0] += 20.0  # twice its estimate
    study.done(0, False)
    assert study.eta() == 180.0  # the 90 s left, at twice


@pytest.mark.slow  # plans twice, each with a quick GEMM probe
def test_a_cells_estimate_counts_its_trials(tmp_path):
    from accelbench.bench.study_planner import plan_study
    from accelbench.config.study_file import parse_study

    def experiments(trials: int) -> str:
        return f"""
[experiments.gas{trials}]
workload = "train"
sweep = {{ gas = [1, 2] }}
[experiments.gas{trials}.options]
model = "gpt2-tiny"
seq = 32
micro_batch = 1
dtype = "fp32"
steps = 2
warmup_steps = 1
trials = "{trials}"
[experiments.noise{trials}]
workload = "noise"
options = {{ model = "gpt2-tiny", seq = 32, steps = 2, warmup_steps = 1, trials = {trials + 4} }}
"""
    text = 'title = "t"\n[profiles.quick]\n' + experiments(2) + experiments(4)
    plan = plan_study(parse_study(text, "t", tmp_path / "t.toml"), "quick", "cpu")
    gas2, noise6, gas4, noise8 = (e.cells for e in plan.experiments)
    # the first cell of the plan also pays the peak's measurement: the second cells compare
    assert round(gas4[1].time_s / gas2[1].time_s, 6) == 2.0
    assert [c.label for c in noise6] == ["condition A", "condition B"]
    assert round(noise8[1].time_s / noise6[1].time_s, 6) == round(8 / 6, 6)


def test_a_study_cell_spans_all_its_trials():
    """A sweep of 6 trials of 2 cells reports 12 starts: study cell 0 is the first 6, closed
    when cell 1 starts, not after its first trial (which had left the ETA counting one trial of
    each cell: 'ETA 6.2 s' with 11 of the noise check's 12 trials to run)."""
    from accelbench.bench.recording.study_run import StudyView, _Cells

    events = []
    view = StudyView(banner=print, note=print, failed=print,
                     cell=lambda i, label: events.append(("cell", i)),
                     done=lambda i, skipped: events.append(("done", i)))
    cells = _Cells(view, offset=10, count=2, prefix="noise: ")
    for i in range(12):
        cells.start(i, 12, f"condition {'AB'[i % 2]}, trial {i // 2 + 1}/6")
    cells.end()
    assert events == [("cell", 10)] * 6 + [("done", 10)] + [("cell", 11)] * 6 + [("done", 11)]


def test_a_cells_time_runs_over_all_its_trials():
    now, lines = [0.0], []
    study = StudyLines([6.0, 6.0], lines.append, clock=lambda: now[0])
    for trial in range(6):
        study.cell(0, f"condition A, trial {trial + 1}/6")
        now[0] += 1.0
    study.done(0, False)
    assert lines == ["[1/2] condition A, trial 6/6 ... 6.0 s, ETA 6.0 s"]
