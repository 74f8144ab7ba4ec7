"""FP8 (torchao float8, emulated on CPU) under launched ranks: FSDP2 (ZeRO-3 with the float8
all-gather of tensorwise scaling, ZeRO-2 rowwise without it) and DDP with ZeRO-1 train, and the
fp8 cell's loss follows the bf16 cell's of the same layout."""

from __future__ import annotations

import pytest

from accelbench.bench.peak import SweepPeak
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.presets import get_preset

pytestmark = pytest.mark.dist

TINY = get_preset("gpt2-tiny").with_changes(n_layer=2, vocab_size=1024, n_positions=64)
LOSS_TOLERANCE_NATS = 0.1  # as tests/unit/test_fp8.py, where it is justified


@pytest.mark.parametrize("layout,recipe,all_gather", [("dp=2,zero=3", "tensorwise", True),
                                                      ("dp=2,zero=2", "rowwise", False),
                                                      ("dp=2,zero=1", "tensorwise", False)])
def test_fp8_trains_data_parallel_on_two_ranks(layout, recipe, all_gather):
    spec = TrainSpec(model=TINY, seq_lens=(32,), micro_batches=(2,), gas=(2,),
                     dtypes=("bf16", "fp8"), steps=3, warmup_steps=1, device="cpu", nproc=2,
                     cell_timeout_s=600, layout=layout, lr=1e-2, lr_warmup_steps=0,
                     fp8_recipe=recipe, peaks=(SweepPeak("bf16", 1e11, "bf16", "test"),))
    bf16, fp8 = run_train_sweep(spec, lambda o: None)
    assert (bf16.status, fp8.status) == ("ok", "ok"), (bf16.reason, fp8.reason)
    m = fp8.metrics
    assert m["fp8_mode"] == "emulated" and m["fp8_linears_converted"] == 8
    assert m["fp8_fsdp_float8_all_gather"] is all_gather
    assert m["fp8_peak_utilisation"] is None and m["peak_precision"] == "bf16"
    ref, got = bf16.raw["rank0"]["loss"], fp8.raw["rank0"]["loss"]
    assert max(abs(a - b) for a, b in zip(got, ref, strict=True)) < LOSS_TOLERANCE_NATS
    assert got != ref
