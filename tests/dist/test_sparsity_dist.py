"""Weight sparsity under launched ranks: the masks are sharded with their weights and kept
(ZeRO-3, tensor parallel, ZeRO-1's sharded optimizer state, pipeline stages).

Each layout's cell is launched once per session (sparse_cell) and shared with
tests/dist/test_train_dist.py, whose launched-cell checks read the same outcomes (a launch costs
~6 s of start-up on 2 cores, the cell itself under a second); both modules are in one xdist
group, so one test process runs them."""

from __future__ import annotations

import pytest

from accelbench.bench.outcome import Outcome
from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.spec import TrainSpec
from accelbench.config.presets import get_preset
from tests.dist.launch_cases import shared_sweep

pytestmark = [pytest.mark.dist, pytest.mark.xdist_group("dist-2ranks")]

TINY = get_preset("gpt2-tiny").with_changes(n_layer=2, vocab_size=1024, n_positions=64)
GIVEN_PEAK = (SweepPeak("fp32", 1e11, "fp32", "given"),)  # no GEMM peak measured
LEVEL = 0.8


def sparse_cell(layout: str) -> tuple[Outcome, list[Outcome]]:
    """(the outcome, everything the sweep sank) of one launched cell at sparsity LEVEL on two
    ranks under `layout`: 3 steps (1 warm-up) of 2 x 2 micro-batches of 32 tokens, fp32, a given
    peak; launched the first time a test asks for the layout (launch_cases.shared_sweep)."""
    spec = TrainSpec(model=TINY, seq_lens=(32,), micro_batches=(2,), gas=(2,), dtypes=("fp32",),
                     steps=3, warmup_steps=1, device="cpu", nproc=2, cell_timeout_s=600, trials=1,
                     layout=layout, sparsities=(LEVEL,), lr=1e-2, lr_warmup_steps=0,
                     peaks=GIVEN_PEAK)
    [outcome], sink = shared_sweep(spec)
    return outcome, sink


@pytest.mark.parametrize("layout", ["dp=2,zero=3", "tp=2", "dp=2,zero=1", "pp=2,schedule=1f1b"])
def test_measured_sparsity_is_the_level_on_two_ranks(layout):
    outcome, _ = sparse_cell(layout)
    assert outcome.status == "ok", outcome.reason
    assert outcome.metrics["sparsity_measured"] == pytest.approx(LEVEL, abs=1e-3)
    assert outcome.metrics["sparse_kernel"] is None
