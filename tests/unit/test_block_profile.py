"""The block benchmark feeds the machine profile (issue 17 item 1): `calibrate --from-block`
stores the newest profile plus a block curve point per measured block cell, the step model
then takes a layer of that shape from them, and the validation never predicts a block cell
from block curves (they may hold that very cell)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from accelbench.analytics.efficiency import ProfileRates, layer_cost
from accelbench.analytics.machine_profile import block_shape
from accelbench.analytics.measured_step_runs import validate_measured_steps, without_blocks
from accelbench.cli.main import main
from accelbench.config.model import ModelConfig
from accelbench.config.presets import resolve_model
from accelbench.report.measured_steps import measured_step_runs
from accelbench.report.stored_profile import load_profile
from accelbench.store.store import ResultStore
from tests.unit.cli_run import run_main

TINY = resolve_model("gpt2-tiny")
SEQ = 64
# every test reads the stores a real calibration made: one test process (xdist group) makes them
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_block_profile")]


def _cli(*args: str) -> int:
    """Exit code of `accelbench ARGS` run in this process (set-up of the shared stores)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["accelbench", *args])
        with pytest.raises(SystemExit) as exit_info:
            main()
    return exit_info.value.code


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """A store with a tiny profile only, and a copy of it with block cells b=1 and b=2."""
    root = tmp_path_factory.mktemp("block_profile")
    only, blocks = root / "profile.db", root / "blocks.db"
    assert _cli("calibrate", "--device", "cpu", "--ops", "gemm,attention,memory", "--dtype",
                "fp32", "--model", "gpt2-tiny", "--tokens", "64,128", "--seq", "64",
                "--memory-sizes", "64KiB", "--repeats", "2", "--warmup", "1",
                "--db", str(only)) == 0
    shutil.copy(only, blocks)
    assert _cli("block", "--model", "gpt2-tiny", "--seq", str(SEQ), "--batch", "1,2",
                "--dtype", "fp32", "--device", "cpu", "--repeats", "3", "--warmup", "1",
                "--db", str(blocks)) == 0
    assert _cli("calibrate", "--from-block", "--db", str(blocks)) == 0
    return {"profile": only, "blocks": blocks}


def test_block_cells_become_block_curves_of_a_new_profile(stores):
    store = ResultStore(stores["blocks"], write=False)
    base, refined = store.query(kind="profile")
    blocks = store.query(kind="block")
    assert refined.spec["base_profile"] == base.id
    assert refined.spec["from_block"] == sorted(r.id for r in blocks)
    assert len(refined.metrics["points"]) == len(base.metrics["points"]) + 2 * len(blocks)
    profile = load_profile(store)  # the newest: the refined one
    shape = block_shape(TINY, SEQ)
    assert shape == "h128-f512-a4-s64"
    assert {"block:fp32:forward:" + shape, "block:fp32:backward:" + shape} <= set(
        profile.curves)
    one = next(r for r in blocks if r.spec["batch"] == 1).metrics
    fwd, bwd = ProfileRates(profile, "fp32").block_s(TINY, SEQ, 1)
    # read at a measured size, the curve gives back that cell's median times
    assert fwd == pytest.approx(one["forward_time_s_median"])
    assert bwd == pytest.approx(one["backward_time_s_median"])
    cost = layer_cost(ProfileRates(profile, "fp32"), TINY, SEQ, 1, 1, 1, False, "fp32", True)
    assert cost.model == pytest.approx(fwd + bwd)  # the layer's ops scaled to the measured


def test_block_cells_are_never_predicted_from_block_curves(stores):
    store = ResultStore(stores["blocks"], write=False)
    base_record, _ = store.query(kind="profile")
    base, refined = load_profile(store, base_record.id), load_profile(store)
    runs = measured_step_runs(store)
    assert len(runs) == 2 and isinstance(runs[0].model, ModelConfig)
    threads = runs[0].threads
    by_base = validate_measured_steps(runs, {threads: base})
    by_refined = validate_measured_steps(runs, {threads: refined})
    assert [r.predicted_s for r in by_refined] == pytest.approx([r.predicted_s for r in by_base])
    assert without_blocks(refined).curves.keys() == base.curves.keys()


@pytest.mark.parametrize(("which", "line"), [
    ("empty", "error: from-block: no measured profile in"),
    ("profile", "error: from-block: no block record of this machine at"),
])
def test_from_block_without_its_inputs_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path,
                                                              stores, which, line):
    db = tmp_path / "e.db"
    if which == "profile":
        shutil.copy(stores["profile"], db)
    else:
        ResultStore(db).close()
    code, out, err = run_main(monkeypatch, capsys, "calibrate", "--from-block", "--db", str(db))
    assert code == 2 and out == ""
    assert err.strip().startswith(line) and len(err.strip().splitlines()) == 1
