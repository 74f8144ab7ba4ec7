"""FP8 (torchao float8, emulated on CPU) under launched ranks: FSDP2 (ZeRO-3 with the float8
all-gather of tensorwise scaling, ZeRO-2 rowwise without it) and DDP with ZeRO-1 train, and the
fp8 cell's loss follows the bf16 cell's.

One bf16 cell (ZeRO-3) is the reference of all three fp8 cells: the ZeRO stage moves the bf16
losses by rounding only (ZeRO-2's equal ZeRO-3's, ZeRO-1's within 2e-4 on this model), far less
than fp8 moves them (~4e-3) and than the tolerance; a launch costs ~6 s of start-up on 2 cores
(an fp8 cell's ranks also import torchao), and the cells themselves a second."""

from __future__ import annotations

import pytest

from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.presets import get_preset

# one 2-rank launch at a time, beside the "dist" group's launches (tests/conftest.py)
pytestmark = [pytest.mark.dist, pytest.mark.xdist_group("dist-2ranks")]

TINY = get_preset("gpt2-tiny").with_changes(n_layer=2, vocab_size=1024, n_positions=64)
LOSS_TOLERANCE_NATS = 0.1  # as tests/unit/test_fp8.py, where it is justified
REFERENCE_LAYOUT = "dp=2,zero=3"


def _spec(layout: str, dtype: str, recipe: str | None = None) -> TrainSpec:
    return TrainSpec(model=TINY, seq_lens=(32,), micro_batches=(2,), gas=(2,), dtypes=(dtype,),
                     steps=3, warmup_steps=1, device="cpu", nproc=2, cell_timeout_s=600, trials=1,
                     layout=layout, lr=1e-2, lr_warmup_steps=0, fp8_recipe=recipe,
                     peaks=(SweepPeak("bf16", 1e11, "bf16", "test"),))


@pytest.fixture(scope="module")
def bf16_losses() -> list[float]:
    """Rank 0's losses of the bf16 cell under REFERENCE_LAYOUT."""
    [bf16] = run_train_sweep(_spec(REFERENCE_LAYOUT, "bf16"), lambda o: None)
    assert bf16.status == "ok", bf16.reason
    return bf16.raw["rank0"]["loss"]


@pytest.mark.parametrize("layout,recipe,all_gather", [("dp=2,zero=3", "tensorwise", True),
                                                      ("dp=2,zero=2", "rowwise", False),
                                                      ("dp=2,zero=1", "tensorwise", False)])
def test_fp8_trains_data_parallel_on_two_ranks(bf16_losses, layout, recipe, all_gather):
    [fp8] = run_train_sweep(_spec(layout, "fp8", recipe), lambda o: None)
    assert fp8.status == "ok", fp8.reason
    m = fp8.metrics
    assert m["fp8_mode"] == "emulated" and m["fp8_linears_converted"] == 8
    assert m["fp8_fsdp_float8_all_gather"] is all_gather
    assert m["fp8_peak_utilisation"] is None and m["peak_precision"] == "bf16"
    ref, got = bf16_losses, fp8.raw["rank0"]["loss"]
    assert max(abs(a - b) for a, b in zip(got, ref, strict=True)) < LOSS_TOLERANCE_NATS
    assert got != ref
