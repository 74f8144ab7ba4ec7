"""The published mixture-of-experts rows (assets/published/moe_runs.csv): every row loads with
its source, address and tags, and is either scored with its layout as published or listed with
the reason it is not modelled; none is fitted (PROVENANCE.md, docs/planner.md)."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from accelbench.analytics.flops import model_flops_per_token
from accelbench.analytics.published import validate_all
from accelbench.analytics.published_csv import MOE_NOT_MODELLED, MOE_RUNS
from accelbench.config.layout import Layout
from accelbench.config.layout_rules import ARITHMETIC, Target, first_broken
from accelbench.config.presets import resolve_model


def _rows() -> list[dict[str, str]]:
    path = resources.files("accelbench").joinpath("assets", "published", "moe_runs.csv")
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_every_row_has_a_source_tags_and_is_check_only() -> None:
    rows = _rows()
    assert len({r["id"] for r in rows}) == len(rows) >= 9
    for row in rows:
        assert row["source"] and row["url"].startswith("https://"), row["id"]
        assert row["oracle_tag"] in ("V", "V*", "D") and row["setup_tag"] in ("V", "U")
        assert row["used_for"] == "check" and row["notes"], row["id"]


def test_every_row_is_scored_or_listed_with_its_reason() -> None:
    scored = {r.run_id for r in MOE_RUNS}
    listed = {u.run_id: u.reason for u in MOE_NOT_MODELLED}
    assert scored | listed.keys() == {r["id"] for r in _rows()} and not scored & listed.keys()
    assert {"M1-1", "M5-1"} <= scored
    for run_id in ("M5-2", "M5-3", "M6-1"):
        assert "GB200 is not in the device table" in listed[run_id]
    assert "EP 8 exceeds dp" in listed["M5-3"] and "EP 8 exceeds dp" in listed["M5-4"]


def test_the_stated_ep_reason_is_the_layout_rules_own() -> None:
    # Mixtral 8x22B at 64k: TP2 x PP4 x CP8 on 256 devices leaves dp = 4 for EP 8
    layout = Layout(dp=4, tp=2, pp=4, vp=14, cp=8, ep=8, mb=1, sp=True,
                    pp_schedule="interleaved_1f1b")
    target = Target(resolve_model("mixtral-8x22b"), 256, 65536, 64)
    broken = first_broken(layout, target, 16, (ARITHMETIC,))
    assert broken is not None and "ep=8 does not divide dp=4" in broken.reason(layout, target, 16)


def test_nemo_b200_mixtral_row_as_published() -> None:
    (run,) = (r for r in MOE_RUNS if r.run_id == "M5-1")
    assert run.device.key == "b200" and run.n_devices == 64 and run.dtype == "fp8"
    assert run.layout == Layout(dp=64, ep=8, mb=2, zero=1)
    assert run.global_batch // (run.layout.dp * run.layout.mb) == 2  # GA 2 as published
    assert run.oracle_kind == "tokens_per_s_per_device" and run.oracle_value == 15457
    # accelbench's model FLOPs a token agree with NeMo's 1282 TFLOP/s at 15457 tokens/s
    flops = model_flops_per_token(run.model, 4096).total
    assert flops == pytest.approx(1282e12 / 15457, rel=5e-3)
    assert run.published_mfu() == pytest.approx(15457 * flops / 2250e12)


def test_validation_scores_the_moe_rows_apart() -> None:
    checked = validate_all([])
    moe = {r.run_id: r for r in checked.moe}
    assert moe.keys() == {r.run_id for r in MOE_RUNS}
    assert all(r.fits and r.predicted_mfu > 0 for r in moe.values())
    assert not moe.keys() & {r.run_id for r in checked.published}  # never in the fit
    assert {u.run_id for u in MOE_NOT_MODELLED} <= {u.run_id for u in checked.not_modelled}
