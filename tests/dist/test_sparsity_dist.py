"""Weight sparsity under launched ranks: the masks are sharded with their weights and kept
(ZeRO-3, tensor parallel, ZeRO-1's sharded optimizer state, pipeline stages)."""

from __future__ import annotations

import pytest

from accelbench.bench.peak import SweepPeak
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.presets import get_preset

pytestmark = pytest.mark.dist

TINY = get_preset("gpt2-tiny").with_changes(n_layer=2, vocab_size=1024, n_positions=64)
GIVEN_PEAK = (SweepPeak("fp32", 1e11, "fp32", "given"),)  # not what these tests read


@pytest.mark.parametrize("layout", ["dp=2,zero=3", "tp=2", "dp=2,zero=1", "pp=2,schedule=1f1b"])
def test_measured_sparsity_is_the_level_on_two_ranks(layout):
    spec = TrainSpec(model=TINY, seq_lens=(32,), micro_batches=(2,), gas=(2,), dtypes=("fp32",),
                     steps=3, warmup_steps=1, device="cpu", nproc=2, cell_timeout_s=600,
                     layout=layout, sparsities=(0.8,), lr=1e-2, lr_warmup_steps=0,
                     peaks=GIVEN_PEAK)
    outcome = run_train_sweep(spec, lambda o: None)[0]
    assert outcome.status == "ok", outcome.reason
    assert outcome.metrics["sparsity_measured"] == pytest.approx(0.8, abs=1e-3)
    assert outcome.metrics["sparse_kernel"] is None
