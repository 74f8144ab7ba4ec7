"""A diverged loss on the multi-process path is recorded like on one device: its 1-based step."""

from __future__ import annotations

import torch

from accelbench.bench.gemm_peak import Peak
from accelbench.bench.train import steps as train_steps
from accelbench.bench.train.cell import run_cell
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.layout import Layout
from accelbench.config.presets import get_preset


def test_nan_loss_is_recorded_as_diverged_with_its_step(one_rank_group, monkeypatch):
    real = train_steps.mean_over_replicas
    calls = []

    def poisoned(loss, layout, device):
        calls.append(1)
        return float("nan") if len(calls) == 3 else real(loss, layout, device)

    monkeypatch.setattr(train_steps, "mean_over_replicas", poisoned)
    model = get_preset("gpt2-tiny").with_changes(n_layer=1, n_positions=32, vocab_size=256)
    spec = TrainSpec(model, seq_lens=(16,), micro_batches=(1,), dtypes=("fp32",), steps=5,
                     warmup_steps=1)
    outcome = run_cell(spec, TrainCell(16, 1, 1, "fp32", "none"), Layout(dp=1),
                       torch.device("cpu"), Peak(None, "fp32", "none"))
    assert outcome.status == "diverged" and outcome.metrics["diverged_step"] == 3
    assert "at step 3" in outcome.reason
