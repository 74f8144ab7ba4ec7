"""Study files and the study runner: bad files are one line naming the key and exit 2 before
anything runs; the built-in study's quick profile plans the expected cells; a tiny study run
(through `accelbench run`, which also writes the report) stores every cell tagged with its
study, and a second run skips them all."""

from __future__ import annotations

import sqlite3
from dataclasses import fields
from pathlib import Path

import pytest
from cli_run import run_main as _run_main

from accelbench.bench import gemm_peak as peak_mod
from accelbench.bench.study_planner import available_devices, plan_study
from accelbench.bench.train.train_options import TrainOptions, build_spec, with_defaults
from accelbench.cli import study as cli_study
from accelbench.config.records.peak import PeakMetrics
from accelbench.config.study_file import BUILTIN_DIR, load_study, parse_study
from accelbench.store.store import ResultStore
from accelbench.workloads.train import TRAIN_AXES

GOOD = """
title = "t"
[profiles.full]
description = "big"
[profiles.quick]
description = "small"
[experiments.a]
workload = "train"
options = { model = "gpt2-tiny", dtype = "fp32", steps = 3, warmup_steps = 1 }
sweep = { seq = [32, 64] }
"""




def _write(tmp_path: Path, text: str, name: str = "t") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


# --- validation: one line naming the key, exit 2, nothing run ----------------------------------

BAD = [
    (GOOD + 'colour = "red"\n', "study.experiments.a.colour: unknown key (allowed: workload, "
     "source, description, options, sweep, full, quick)"),
    ('colour = "red"\n' + GOOD, "study.colour: unknown key (allowed: title, description, "
     "profiles, experiments)"),
    (GOOD.replace("steps = 3,", "stepz = 3,"), "study.experiments.a.options.stepz: unknown "
     "option of workload 'train' (allowed: model, data, seq, "),
    (GOOD.replace("seq = [32, 64]", "micro_batch = [0, 4]"),
     "study.experiments.a.sweep.micro_batch: must be positive, got 0"),
    (GOOD.replace('dtype = "fp32"', 'dtype = "fp64"'),
     "study.experiments.a.options.dtype: unknown value 'fp64' (allowed: fp32, fp16, bf16, fp8)"),
    (GOOD.replace("steps = 3", 'steps = "ten"'),
     "study.experiments.a.options.steps: must be an integer, got 'ten'"),
    (GOOD.replace("steps = 3", "steps = true"),
     "study.experiments.a.options.steps: must be an integer, got True"),
    (GOOD.replace("steps = 3, warmup_steps = 1", "steps = 3"),
     "study.experiments.a.options.warmup_steps: must be in [0, steps), got 5"),
    (GOOD.replace('workload = "train"', 'workload = "inference"'),
     "study.experiments.a.workload: unknown workload 'inference' (allowed: block, train, "
     "genslm, scale, noise)"),
    (GOOD.replace("seq = [32, 64]", "seq = 32"),
     "study.experiments.a.sweep.seq: a swept axis must be a list, got an integer"),
    (GOOD.replace('model = "gpt2-tiny"', 'model = ["gpt2-tiny"]'),
     "study.experiments.a.options.model: a fixed option takes one value, got a list"),
    (GOOD + '[experiments.a.quick]\noptions = { model = "gpt5" }\n',
     "study.experiments.a.quick.options.model: unknown preset 'gpt5'"),
    (GOOD + '[experiments.a.quick]\nmodel = "gpt2"\n',
     "study.experiments.a.quick.model: unknown key (allowed: options, sweep)"),
    (GOOD.replace('dtype = "fp32",', 'dtype = "fp32", device = "cuda",'),
     "study.experiments.a.options.device: the device is chosen when the study runs"),
    (GOOD.replace('workload = "train"', 'workload = "train"\nrequires = ["sparsity"]'),
     "study.experiments.a.requires: unknown key (allowed: workload, source, description, "
     "options, sweep, full, quick)"),
    (GOOD.replace("[profiles.quick]", "[profiles.auto]"),
     "study.profiles.auto: auto is chosen when the study runs"),
    (GOOD.replace("sweep = { seq = [32, 64] }", 'sweep = { seq = [32, 64], dtype = ["fp32"] }'),
     "study.experiments.a.sweep.dtype: is both fixed (options) and swept (sweep)"),
    (GOOD.replace("[experiments.a]", "[experiments.'a b']"),
     "study.experiments.a b: names letters, digits, '-' and '_' only"),
    (GOOD.replace('workload = "train"', 'workload = "block"').replace(
        "steps = 3, warmup_steps = 1", "repeats = 0, seq = 32").replace("seq = [32, 64]",
                                                                           "batch = [1]"),
     "study.experiments.a.options.repeats: must be a positive number, got 0"),
    (GOOD.replace("[experiments.a]", "[experimentz.a]"),
     "study.experimentz: unknown key"),
    (GOOD.replace("= [32, 64] }", "= [32, 64] \n"), "study: "),  # not TOML
]


@pytest.mark.parametrize("text,line", BAD)
def test_a_bad_study_file_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, text, line):
    path = _write(tmp_path, text)
    code, out, err = _run_main(monkeypatch, capsys, "study", "run", str(path), "--profile",
                               "quick")
    assert code == 2 and out == ""
    assert err.startswith(f"error: {line}"), err
    assert err.count("\n") == 1
    assert not (tmp_path / "results.db").exists()  # nothing run, no database made


@pytest.mark.parametrize("args,line", [
    (["--profile", "medium"], "profile: study 't' has no profile 'medium' (allowed: full, "
     "quick, auto)"),
    (["--device", "tpu"], "device: unknown device 'tpu'"),
])
def test_a_bad_profile_or_device_is_one_line(tmp_path, monkeypatch, capsys, args, line):
    path = _write(tmp_path, GOOD)
    code, out, err = _run_main(monkeypatch, capsys, "study", "run", str(path), *args)
    assert (code, out) == (2, "") and err.startswith(f"error: {line}") and err.count("\n") == 1


def test_auto_needs_the_profile_it_picks(tmp_path, monkeypatch, capsys):
    path = _write(tmp_path, GOOD.replace("[profiles.quick]", "[profiles.small]"))
    code, _, err = _run_main(monkeypatch, capsys, "study", "run", str(path), "--device", "cpu")
    assert code == 2
    assert err == ("error: profile: auto picks 'quick' on a CPU, which study 't' does not "
                   "declare (allowed: full, small)\n")


def test_an_unknown_study_names_those_there_are(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ACCELBENCH_STUDIES", str(tmp_path))
    _write(tmp_path, GOOD, "mine")
    code, _, err = _run_main(monkeypatch, capsys, "study", "run", "nope")
    assert code == 2
    assert err.startswith("error: study: no study named 'nope'")
    assert "emani2023, gpu-accept, mine" in err


def test_the_sweep_axes_are_the_options_build_spec_reads_as_lists():
    """Each TRAIN_AXES option that TrainOptions has gives one cell per listed value."""
    names = {f.name for f in fields(TrainOptions)}
    values = {"seq": "32,64", "micro_batch": "1,2", "gas": "1,2", "dtype": "fp32,bf16",
              "recompute": "none,full", "sparsity": "0,0.5"}
    for axis in TRAIN_AXES:
        if axis in names:
            options = {"model": "gpt2-tiny", "seq": "32", axis: values[axis]}
            assert len(build_spec(with_defaults(**options)).cells()) == 2, axis


# --- planning -----------------------------------------------------------------------------------


def test_the_built_in_quick_profile_plans_the_papers_experiments(tmp_path, monkeypatch,
                                                                   capsys):
    plan = plan_study(load_study("emani2023"), "quick", "cpu")
    assert plan.profile == "quick"
    by_name = {e.experiment.name: e for e in plan.experiments}
    assert list(by_name) == ["block", "seqlen", "gas", "sparsity", "scaling", "genslm",
                             "genslm-longest", "noise"]
    assert [e.experiment.source for e in plan.experiments] == [
        "figures 3-4", "table III", "figure 6", "figure 7", "table II", "table IV", "table IV",
        "noise floor"]
    # the main job measures its own noise floor: both A/A conditions, over all their trials
    assert [c.label for c in by_name["noise"].cells] == ["condition A", "condition B"]
    block = [c.label for c in by_name["block"].cells]
    assert block == [f"batch {b} {d}" for d in ("fp32", "fp16", "bf16") for b in (1, 2, 4, 8)]
    seq = by_name["seqlen"].cells  # one device, then cp=2 where 2 devices (cores) are here
    cores, _ = available_devices(plan.device)
    layouts = ["dp=1", "cp=2"][:min(cores, 2)]
    assert [c.label.split(" mb")[0] for c in seq] == [
        f"layout {lay}: seq {n}" for lay in layouts for n in (128, 256, 512, 1024)]
    fit = {"dp=1": ["fits"] * 2 + ["does not fit"] * 2, "cp=2": ["fits"] * 3 + ["does not fit"]}
    assert [c.verdict for c in seq] == [v for lay in layouts for v in fit[lay]]  # 1 GiB a rank
    assert [c.time_s for c in seq[2:4]] == [0.0, 0.0]  # refused before they allocate
    assert [c.label.split(" fp32")[0] for c in by_name["gas"].cells] == [
        f"seq 128 mb 1 gas {g}" for g in (1, 2, 4, 8)]
    sparsity = by_name["sparsity"]
    assert len(sparsity.cells) == 4 and not sparsity.skipped
    assert [c.label for c in by_name["scaling"].cells] == [
        f"{n} device(s)" for n in (1, 2, 4, 8) if n <= cores]
    genslm = by_name["genslm"].cells
    assert [c.label.split(":")[0] for c in genslm] == ["model genslm-25m", "model genslm-250m"]
    assert [c.verdict for c in genslm] == ["fits", "does not fit"]
    assert [c.label for c in by_name["genslm-longest"].cells] == [
        "longest seq from seq 256 mb 1 fp32: 1216 (estimate)"]
    assert all(c.time_s >= 0 for c in plan.cells) and sum(c.time_s for c in plan.cells) > 0

    code, out, err = _run_main(monkeypatch, capsys, "study", "run", "emani2023", "--profile",
                               "quick", "--device", "cpu", "--dry-run")
    assert code == 0, err
    assert f"{len(plan.cells)} cells" in out and "estimated time:" in out
    assert "does not fit" in out and "batch 8 bf16" in out and "Nothing was run" in out
    assert not (tmp_path / "results.db").exists()  # no database made


def test_a_dry_run_opens_no_database_and_left_out_parts_say_why(tmp_path, monkeypatch,
                                                                  capsys):
    text = GOOD + """
[experiments.beam]
workload = "scale"
sweep = { devices = [4096] }
[experiments.beam.options]
model = "gpt2-tiny"
seq = 32
micro_batch = 1
dtype = "fp32"
[experiments.wide]
workload = "scale"
sweep = { devices = [1, 4096] }
[experiments.wide.options]
model = "gpt2-tiny"
seq = 32
micro_batch = 1
dtype = "fp32"
steps = 3
warmup_steps = 1
"""
    plan = plan_study(parse_study(text, "t", tmp_path / "t.toml"), "quick", "cpu")
    beam, wide = plan.experiments[1:]
    assert beam.skipped.startswith("device counts 4096 left out") and not beam.cells
    assert [c.label for c in wide.cells] == ["1 device(s)"]
    assert wide.sweeps[0].note.startswith("device counts 4096 left out: this machine has")
    code, out, _ = _run_main(monkeypatch, capsys, "study", "run",
                             str(_write(tmp_path, text)), "--dry-run", "--device", "cpu")
    assert code == 0 and "skipped: device counts 4096 left out" in out
    assert not (tmp_path / "results.db").exists()


def test_show_prints_the_file_and_list_finds_user_studies(tmp_path, monkeypatch, capsys):
    code, out, _ = _run_main(monkeypatch, capsys, "study", "show", "emani2023")
    assert code == 0 and out == (BUILTIN_DIR / "emani2023.toml").read_text()
    assert parse_study(out, "copy", tmp_path / "copy.toml").profiles.keys() == {"full", "quick"}
    monkeypatch.setenv("ACCELBENCH_STUDIES", str(tmp_path))
    _write(tmp_path, GOOD, "mine")
    _write(tmp_path, "not toml [", "broken")
    code, out, _ = _run_main(monkeypatch, capsys, "study", "list")
    assert code == 0
    assert "emani2023 (built-in" in out and "mine (user" in out and "seqlen" in out
    assert "broken (user" in out and "cannot be used" in out


# --- running ------------------------------------------------------------------------------------

TINY = """
title = "tiny"
[profiles.quick]
description = "seconds"
[experiments.blk]
workload = "block"
source = "figures 3-4"
options = { model = "gpt2-tiny", seq = 32, repeats = 2, warmup = 1 }
sweep = { batch = [1, 2], dtype = ["fp32"] }
[experiments.seq]
workload = "train"
source = "table III"
options = { model = "gpt2-tiny", micro_batch = 1, dtype = "fp32", steps = 2, warmup_steps = 1 }
sweep = { seq = [32, 64] }
[experiments.long]
workload = "genslm"
source = "table IV"
[experiments.long.options]
model = "gpt2-tiny"
seq = 64
micro_batch = 1
dtype = "fp32"
steps = 2
warmup_steps = 1
longest_seq = true
mem_limit = "1.2GiB"
"""


@pytest.fixture
def quick_peak(monkeypatch):
    """The CPU's GEMM peak decided and recorded as a sweep does, without the seconds it takes
    to time; counts how often it is measured."""
    calls = []

    def measure(device, dtype, tf32, threads=None, attempts=None):
        calls.append(dtype)
        return PeakMetrics(1e11, 1e11, 1e11, 1, 64, "nn", threads or 1), [1e11]

    monkeypatch.setattr(peak_mod, "measure_peak", measure)
    return calls


def _cells(db: Path) -> list[tuple]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT id, kind, status FROM results WHERE kind IN "
                            "('block', 'train') ORDER BY id").fetchall()


@pytest.mark.slow
def test_a_study_stores_every_cell_tagged_and_a_second_run_skips_them_all(
        tmp_path, monkeypatch, capsys, quick_peak):
    study = _write(tmp_path, TINY, "tiny")
    db, report = tmp_path / "s.db", tmp_path / "report"
    monkeypatch.setattr(cli_study, "MAIN_STUDY", str(study))
    code, out, err = _run_main(monkeypatch, capsys, "run", "--db", str(db), "--out",
                               str(report), "--device", "cpu")
    assert code == 0, err
    assert quick_peak == ["fp32"]  # one peak for the study's sweeps in this process
    records = list(ResultStore(db, write=False))
    cells = [r for r in records if r.kind in ("block", "train")]
    assert [(r.kind, r.spec["study"]["experiment"]) for r in cells] == [
        ("block", "blk")] * 2 + [("train", "seq")] * 2 + [("train", "long")]
    assert all(r.spec["study"] == {"name": "tiny", "experiment": r.spec["study"]["experiment"],
                                   "profile": "quick"} for r in records)
    assert all(r.status == "ok" for r in cells), [(r.status, r.reason) for r in cells]
    assert cells[-1].spec["seq_search"]["largest"] > 64  # the longest sequence, measured
    assert any(r.kind == "seq-search" for r in records)
    assert (report / "report.html").is_file() and str(report / "report.html") in out
    assert "report: " in err and "xdg-open" in err

    stored = _cells(db)
    code, out, err = _run_main(monkeypatch, capsys, "study", "run", str(study), "--db",
                               str(db), "--device", "cpu")
    assert code == 0, err
    assert _cells(db) == stored  # nothing measured again
    assert quick_peak == ["fp32"]  # nor the peak
    assert sum(line.startswith("  skipped ") for line in err.splitlines()) == 5
    assert "2 cells skipped (finished on this machine), 0 run" in err
    rows = [line.split("│") for line in out.splitlines() if line.startswith("│")]
    assert [(r[1].strip(), r[3].strip(), r[7].strip()) for r in rows] == [
        ("blk", "2", "2"), ("seq", "2", "2"), ("long", "1", "1")]
