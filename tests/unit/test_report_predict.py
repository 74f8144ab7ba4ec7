"""The report's predicted-vs-measured overlays carry the planner's 80% interval, the same one
`plan` gives (analytics.confidence), labelled as an estimate: in the tables as
'pred (lo-hi) error' and in the block figure as a band."""

from __future__ import annotations

import re
from dataclasses import asdict

import pytest

from accelbench.analytics.confidence import prediction_interval
from accelbench.analytics.plan_input import resolve_plan_input, run_plan
from accelbench.analytics.plan_options import PlanOptions
from accelbench.config.presets import get_preset
from accelbench.report.content import PREDICTED
from accelbench.report.findings import TERMS
from accelbench.report.machines import group_machines
from accelbench.report.predict import (
    INTERVAL_NOTE,
    Prediction,
    block_prediction,
    train_prediction,
)
from accelbench.report.training import TABLE_CAPTION, measure_header
from accelbench.store.record import Record
from accelbench.workloads.block.report import block_section

H100 = {"device_type": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 8,
        "device_spec_key": "h100-sxm", "torch": "2.11.0"}


def _train_record(measured_tokens_per_device: float) -> Record:
    """An 8-GPU data-parallel llama3-8b cell on H100s (bf16, seq 2048, micro-batch 2)."""
    model = get_preset("llama3-8b")
    spec = {"model_name": "llama3-8b", "model": asdict(model), "seq_len": 2048,
            "micro_batch": 2, "gas": 1, "dtype": "bf16", "recompute": "none",
            "layout": {"dp": 8, "tp": 1, "pp": 1, "zero": 3}}
    return Record("train", "ok", spec, H100,
                  {"mfu": 0.4, "n_devices": 8,
                   "tokens_per_s_per_device": measured_tokens_per_device})


def test_a_training_cell_takes_the_interval_plan_gives_the_same_prediction() -> None:
    pred = train_prediction(_train_record(5000.0))
    assert isinstance(pred, Prediction) and pred.interval is not None
    # the same layout through `plan`: the same interval, by the same rule
    request = resolve_plan_input(PlanOptions(
        model="llama3-8b", device="h100-sxm", nodes=1, global_batch=16, seq=2048,
        layout="dp=8,tp=1,pp=1,cp=1,ep=1,vp=1,mb=2,zero=3,recompute=none,sp=off"))
    outcome = run_plan(request)
    planned, confidence = outcome.results[0], outcome.confidence[0]
    assert pred.value == pytest.approx(planned.step.tokens_per_s / 8, rel=1e-9)
    assert pred.interval == confidence.interval
    assert pred.interval == prediction_interval("h100-sxm", "bf16", planned.limiter, 8)
    low, high = pred.bounds
    assert low == pytest.approx(pred.value * pred.interval.low)
    assert high == pytest.approx(pred.value * pred.interval.high)
    assert low < pred.value < high


def test_the_table_text_is_pred_lo_hi_then_error_and_says_when_outside() -> None:
    pred = train_prediction(_train_record(5000.0))
    low, high = pred.bounds
    inside = Prediction(pred.value, pred.value, pred.interval)  # measured = predicted
    assert inside.text() == f"{pred.value:,.0f} ({low:,.0f}-{high:,.0f}) +0%"
    far = Prediction(pred.value, pred.value / (2 * pred.interval.high), pred.interval)
    assert far.inside is False and far.text().endswith(", outside")
    assert re.fullmatch(r"[\d,]+ \([\d,]+-[\d,]+\) [+-]\d+%, outside", far.text())
    assert Prediction(10.0, 8.0).text(".3g") == "10 +25%"  # no interval: value and error


def test_the_training_table_names_the_interval_an_estimate() -> None:
    assert "80% interval, est." in measure_header("token")[-1]
    assert "Planner" in TABLE_CAPTION  # the interval itself: the Methods section's term, once
    assert "estimate" in INTERVAL_NOTE and "leave-one-source-out" in INTERVAL_NOTE
    (term,) = [text for name, text in TERMS if name.startswith("Planner")]
    assert INTERVAL_NOTE[1:] in term


def _block_record(batch: int, fwd_bwd_s: float) -> Record:
    model = get_preset("gpt2-xl")
    spec = {"model_name": "gpt2-xl", "model": asdict(model), "seq_len": 1024, "batch": batch,
            "dtype": "bf16"}
    flops = 3 * 2 * 1.6e9 / 48 * 1024 * batch  # about one layer's forward+backward
    metrics = {"forward_backward_flops": flops, "forward_backward_time_s_median": fwd_bwd_s,
               "forward_flops": flops / 3, "forward_time_s_median": fwd_bwd_s / 3,
               "backward_flops": 2 * flops / 3, "backward_time_s_median": 2 * fwd_bwd_s / 3,
               "forward_backward_tflops_per_device": flops / fwd_bwd_s / 1e12,
               "tokens_per_step_global": 1024 * batch, "peak_precision": "bf16"}
    return Record("block", "ok", spec, {**H100, "device_count": 1}, metrics)


def test_the_block_table_and_figure_carry_the_interval() -> None:
    records = [_block_record(b, 1e-3 * b) for b in (8, 16)]
    section = block_section(group_machines([("a.db", r) for r in records]))
    (table,) = section.tables
    assert "80% interval, est." in table.header[-1] and "Planner" in table.method
    pred = block_prediction(records[0])
    assert isinstance(pred, Prediction)
    assert pred.interval == prediction_interval("h100-sxm", "bf16", "compute", 1)
    for row in table.rows:
        assert re.fullmatch(r"[\d.]+ \([\d.]+-[\d.]+\) [+-]\d+%(, outside)?", row[-1]), row
    fig3 = section.figures[0]
    (planner,) = [s for s in fig3.panels[0].series if s.kind == PREDICTED]
    low, high = pred.bounds
    assert planner.low == (low, low) and planner.high == (high, high)
    assert "80% interval" in fig3.caption  # what it is: the Methods section's terms (TERMS)
