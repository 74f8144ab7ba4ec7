"""The report's opening: one line per experiment that ran, with its figure, interval and verdict
in plain words (no significant difference, a speedup with its interval and scaling efficiency,
does not fit (estimated) and where a length runs instead), a machine named only where there are
several; captions of at most two sentences and 45 words, the method in one section at the end;
long tables folded under their headline rows. Records are made here as a store holds them
(spec, metrics, per-trial times), so each verdict is known in advance."""

from __future__ import annotations

import re

import pytest

from accelbench.config.records.fields import ShownFigure
from accelbench.config.trial_count import TRIAL_VALUES
from accelbench.report import build_report
from accelbench.report.compare import compare_figure, compare_section
from accelbench.report.machines import group_machines
from accelbench.report.markdown import md_cell, to_appendix, to_markdown
from accelbench.store.record import Record
from accelbench.store.store import ResultStore
from accelbench.workloads.block.report import block_section
from accelbench.workloads.noise.report import noise_section
from accelbench.workloads.scale.report import scaling_section
from accelbench.workloads.train.gas import gas_section
from accelbench.workloads.train.seqlen import seq_section

ENV = {"device_type": "cpu", "device_name": "CPU", "device_count": 1, "cpu": "Test CPU",
       "cpu_count": 2, "torch": "2.13.0+cpu", "host": "vm"}
OTHER = {**ENV, "device_type": "cuda", "device_name": "NVIDIA H100 80GB HBM3",
         "device_spec_key": "h100-sxm", "host": "gpu"}
TOKENS = 128  # a step's tokens
BASE = {"benchmark": "train", "model_name": "gpt2-tiny", "seq_len": 64, "dtype": "fp32",
        "micro_batch": 2, "gas": 1, "recompute": "none", "compile": False, "sparsity": 0.0,
        "world_size": 1}
STEP = ShownFigure.STEP_TIME


def train(times: list[float] | None, env: dict = ENV, status: str = "ok", reason: str = "",
          **spec) -> tuple[str, Record]:
    """A training cell: its per-trial median step times (None: one trial), or a refusal."""
    metrics, raw = {}, {}
    if status == "ok":
        median = sorted(times)[len(times) // 2]
        metrics = {"n_devices": spec.get("world_size", 1), "tokens_per_step_global": TOKENS,
                   "step_time_s_median": median, "tokens_per_s_global": TOKENS / median,
                   "tokens_per_s_per_device": TOKENS / median, "mfu": 0.1, "loss_last": 5.0,
                   "peak_flops_per_s_per_device": 1e11, "peak_precision": "fp32",
                   "peak_label": "measured peak (GEMM n=256 nn, best of 5, 2 thread(s))"}
        raw = {TRIAL_VALUES: {STEP: times}} if len(times) > 1 else {}
    return ("a.db", Record("train", status, {**BASE, **spec}, env, metrics, raw, reason))


SAME = [0.100, 0.101, 0.099, 0.102, 0.098, 0.100]
FAST = [0.050, 0.051, 0.049, 0.050, 0.052, 0.050]
ESTIMATED = ("does not fit (estimated): estimated 1.67 GiB > 1.00 GiB a rank (decided before "
             "allocating)")


def test_gas_says_no_significant_difference_and_each_speedup_with_its_interval():
    machines = group_machines([train(SAME, gas=1), train(SAME, gas=2), train(SAME, gas=4),
                               train(FAST, gas=8)])
    (finding,) = gas_section(machines).findings
    assert finding.section == "gas" and not finding.text.startswith("M1")
    assert finding.text.startswith("Gradient accumulation 1 to 8 over GAS 1: no significant "
                                   "difference at 2, 4 (")
    assert re.search(r"8: 2\.\d\dx \[\d\.\d\d, \d\.\d\d\]", finding.text), finding.text


def test_one_trial_claims_no_verdict():
    machines = group_machines([train([0.1], gas=1), train([0.05], gas=2)])
    (finding,) = gas_section(machines).findings
    assert finding.text.endswith("2: 2.00x (one trial: no interval)")


def test_sequence_length_says_what_does_not_fit_and_where_it_runs():
    machines = group_machines([
        train(SAME, seq_len=128), train(None, status="oom", reason=ESTIMATED, seq_len=512),
        train(FAST, seq_len=512, world_size=2, layout={"cp": 2}),
        train(None, status="oom", reason=ESTIMATED, seq_len=1024),
        train(None, status="oom", reason=ESTIMATED, seq_len=1024, world_size=2,
              layout={"cp": 2})])
    (finding,) = seq_section(machines).findings
    text = finding.text
    assert text.startswith("Sequence length (gpt2-tiny, fp32): 128: runs on 1 rank; 512: does "
                           "not fit 1 rank(s) (estimated); runs on cp=2, "), text
    assert "tokens/s a device" in text
    assert text.endswith("1024: does not fit 1 rank(s) (estimated); does not fit 2 rank(s) "
                         "(estimated)")


def _scale(env: dict = ENV) -> tuple[str, Record]:
    rows = [{"devices": 1, "status": "ok", "baseline_devices": 1, "tokens_per_s_global": 100.0,
             "tokens_per_s_per_device": 100.0, "speedup": 1.0, "scaling_efficiency": 1.0},
            {"devices": 2, "status": "ok", "baseline_devices": 1, "tokens_per_s_global": 163.0,
             "tokens_per_s_per_device": 81.5, "speedup": 1.63, "scaling_efficiency": 0.815,
             "trials": 6, "speedup_low": 1.48, "speedup_high": 1.83, "speedup_verdict": "faster",
             "scaling_efficiency_low": 0.74, "scaling_efficiency_high": 0.915}]
    spec = {"model_name": "gpt2-tiny", "mode": "weak", "devices": [1, 2], "zero": 0,
            "base": {"dtypes": ["fp32"]}}
    return ("a.db", Record("scale", "ok", spec, env, {"rows": rows}))


def test_scaling_gives_the_speedup_interval_and_efficiency():
    (finding,) = scaling_section(group_machines([_scale()])).findings
    assert finding.text == ("Device scaling (gpt2-tiny weak, 1 to 2 ranks): 2 over 1: 1.63x "
                            "[1.48, 1.83], scaling efficiency 81.5% [74.0-91.5%]")


def _noise(env: dict = ENV) -> tuple[str, Record]:
    metrics = {"trials": 6, "throughput_ratio": 0.97, "throughput_ratio_low": 0.87,
               "throughput_ratio_high": 1.18, "noise_verdict": "no significant difference",
               "noise_floor": 0.181, "disturbed": False}
    spec = {"model_name": "gpt2-tiny", "seq_len": 64, "micro_batch": 1, "dtype": "fp32"}
    return ("a.db", Record("noise", "ok", spec, env, metrics))


def test_noise_floor_is_a_finding_and_several_machines_are_named():
    (one,) = noise_section(group_machines([_noise()])).findings
    assert one.text.startswith("Noise floor (A/A check, gpt2-tiny seq 64 mb 1 fp32): ±18.1%, "
                               "no significant difference (n.s. 0.97x [0.87-1.18])")
    found = noise_section(group_machines([_noise(), _noise(OTHER)])).findings
    assert [f.text[:4] for f in found] == ["M1: ", "M2: "]


def _block(env: dict, dtype: str, batch: int, seconds: float) -> tuple[str, Record]:
    spec = {"model_name": "gpt2-tiny", "seq_len": 64, "batch": batch, "dtype": dtype}
    metrics = {"forward_backward_time_s_median": seconds, "forward_backward_time_s_min": seconds,
               "forward_backward_time_s_max": seconds * 1.2,
               "forward_backward_tokens_per_s_per_device": 64 * batch / seconds,
               "forward_backward_mfu": 0.2, "tokens_per_step_global": 64 * batch}
    return ("a.db", Record("block", "ok", spec, env, metrics))


def test_block_names_its_fastest_precision_and_batch():
    machines = group_machines([_block(ENV, "fp32", 1, 0.01), _block(ENV, "fp32", 4, 0.02),
                               _block(ENV, "bf16", 4, 0.04)])
    (finding,) = block_section(machines).findings
    assert finding.text.startswith("Transformer block (gpt2-tiny layer, seq 64): fastest fp32 "
                                   "at batch 4, 12,800 (10,667-12,800) tokens/s")
    assert finding.text.endswith("the best of bf16 6,400 tokens/s")


def test_one_machine_draws_no_speedup_panel_and_no_speedup_table():
    one = group_machines([train(SAME), train(FAST, gas=2)])
    assert len(compare_figure_of(one).panels) == 1
    assert not [t for t in compare_section(one, one[0], 1e9).tables if "Speedup" in t.title]
    two = group_machines([train(SAME), train(FAST, env=OTHER)])
    assert len(compare_figure_of(two).panels) == 2
    speedups = [t for t in compare_section(two, two[0], 1e9).tables if "Speedup" in t.title]
    assert speedups and {r[2] for r in speedups[0].rows} == {"M1", "M2"}


def compare_figure_of(machines):
    from accelbench.report.compare import best_cells

    return compare_figure(best_cells(machines), machines, machines[0])


def test_time_to_train_holds_training_workloads_only():
    machines = group_machines([train(SAME), _block(ENV, "fp32", 4, 0.02)])
    section = compare_section(machines, machines[0], 1e9)
    (timed,) = [t for t in section.tables if t.title.startswith("Time to train")]
    assert all(row[0].startswith("train ") for row in timed.rows) and timed.rows


@pytest.fixture()
def report(tmp_path):
    """A report of every kind above, written to a store and read back as `report` reads it."""
    store = ResultStore(tmp_path / "a.db")
    items = [train(SAME, gas=1), train(SAME, gas=2), train(FAST, gas=4),
             train(None, status="oom", reason=ESTIMATED, seq_len=512), _scale(), _noise(),
             _block(ENV, "fp32", 1, 0.01), _block(ENV, "fp32", 4, 0.02)]
    for _, r in items:
        store.add(r)
    store.close()
    return build_report([tmp_path / "a.db"])


def test_captions_are_short_and_the_method_is_at_the_end(report):
    captions = [x.caption for s in report.sections for x in (*s.figures, *s.tables)
                if x.caption]
    assert captions
    for caption in captions:
        assert len(caption.split()) <= 45, caption
        assert len(re.findall(r"[.!?](\s|$)", caption)) <= 2, caption
    text = to_markdown(report)
    assert text.index("## Findings") < text.index("## Machines") < text.index("## Methods")
    assert "Reads:" not in text and "Reads:" in to_appendix(report)
    findings = text[text.index("## Findings"):text.index('<a id="machines">')]
    assert len(findings.strip().splitlines()) <= 15
    assert [f.section for f in report.findings] == ["block", "scaling", "seq", "gas", "noise"]


def test_a_long_table_shows_its_headline_and_folds_the_rest(report):
    from accelbench.report.render import _html_table

    folded = [t for t in report.tables() if t.folded]
    assert folded
    markdown, appendix = to_markdown(report), to_appendix(report)
    for table in folded:
        assert f"All {len(table.rows)} rows: [appendix.md](appendix.md#" in markdown
        page = _html_table(table)
        assert page.count("<details>") == 1 and page.count("<tr>") == (
            (len(table.shown) + 1 if table.shown else 0) + len(table.rows) + 1)
        for row in table.rows:  # every row, intervals included, is in the appendix
            assert "| " + " | ".join(md_cell(c) for c in row) + " |" in appendix
