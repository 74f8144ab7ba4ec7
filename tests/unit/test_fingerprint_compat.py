"""Fields added to specs after fingerprint version 1 keep old cells' fingerprints: a store
written by an older accelbench resumes without measuring its finished cells again."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.store.fingerprint import (
    ADDED_AT_DEFAULT,
    FINGERPRINT_KEY,
    cell_fingerprint,
    spec_identity,
)

OLD = json.loads((Path(__file__).parents[1] / "data" / "fingerprint_v1_train.json").read_text())
# The fields of fingerprint version 1 (commit 61b9e2a's dataclasses).
V1_MODEL = {"name", "n_layer", "n_head", "d_model", "vocab_size", "n_positions", "d_ff",
            "position", "rotary_pct", "parallel_residual", "tie_embeddings", "activation",
            "layer_norm_eps"}
V1_LAYOUT = {"dp", "tp", "pp", "vp", "zero", "sp", "pp_schedule", "mb", "recompute"}


def _defaults(cls: type) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING}


def test_every_later_field_is_declared_with_its_real_default():
    """A model or layout field added after v1 must be listed with its dataclass default, or
    every old cell's fingerprint would change (and resume would measure it again)."""
    for cls, v1, key in ((ModelConfig, V1_MODEL, "model"), (Layout, V1_LAYOUT, "layout")):
        later = {f.name for f in dataclasses.fields(cls)} - v1
        assert later == set(ADDED_AT_DEFAULT[key]), key
        defaults = _defaults(cls)
        assert {k: defaults[k] for k in later} == ADDED_AT_DEFAULT[key], key


def test_a_v1_record_keeps_its_fingerprint():
    spec, env = OLD["spec"], OLD["environment"]
    assert cell_fingerprint(OLD["kind"], spec, env) == spec[FINGERPRINT_KEY]
    today = {**spec, "fp8_recipe": None,
             "model": {**spec["model"], **ADDED_AT_DEFAULT["model"]},
             "layout": {**spec["layout"], **ADDED_AT_DEFAULT["layout"]}}
    assert cell_fingerprint(OLD["kind"], today, env) == spec[FINGERPRINT_KEY]
    llama = {**today, "model": {**today["model"], "norm": "rmsnorm"}}
    assert cell_fingerprint(OLD["kind"], llama, env) != spec[FINGERPRINT_KEY]
    assert "norm" in spec_identity(llama)["model"]


def test_the_spec_written_today_for_the_same_cell_has_the_old_fingerprint():
    """The v1 cell (gpt2-tiny, seq 32, micro-batch 2, 3 steps, 1 warm-up, bf16) built by
    today's options and cell_spec: the same fingerprint as the record the old code stored."""
    from accelbench.bench.train.cell import cell_spec
    from accelbench.bench.train.spec import TrainCell
    from accelbench.bench.train.train_options import TrainOptions, build_spec

    spec = build_spec(TrainOptions(model="gpt2-tiny", seq="32", micro_batch="2", steps=3,
                                   warmup_steps=1, device="cpu", trials="1"))  # v1: one trial
    old = OLD["spec"]
    cell = TrainCell(old["seq_len"], old["micro_batch"], old["gas"], old["dtype"],
                     old["recompute"])
    today = cell_spec(spec, cell, Layout(), old["device"])
    assert cell_fingerprint(OLD["kind"], today, OLD["environment"]) == old[FINGERPRINT_KEY]
    three = cell_spec(replace(spec, trials=3), cell, Layout(), old["device"])
    assert cell_fingerprint(OLD["kind"], three, OLD["environment"]) != old[FINGERPRINT_KEY]
