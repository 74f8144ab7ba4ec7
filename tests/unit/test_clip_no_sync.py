"""Gradient clipping inside the timed step reads nothing back to the host (the issue's host
syncs: a weight tensor built from a Python list, float(norm)) and still clips as torch does,
plain and FSDP2 (DTensor) gradients alike."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from accelbench.config.layout import Layout
from accelbench.parallel.optim import clip_grad_norm_


def _model_with_grads(scale: float) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    (model(torch.randn(4, 16)).sum() * scale).backward()
    return model


@pytest.mark.parametrize("scale", [100.0, 1e-3])  # clipped, and under the limit
def test_clipping_equals_torchs_and_reads_nothing_back(scale, monkeypatch):
    ours, ref = _model_with_grads(scale), _model_with_grads(scale)
    expected = torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
    with monkeypatch.context() as patch:
        for name in ("__float__", "item", "tolist", "__bool__"):
            patch.setattr(torch.Tensor, name, lambda *a, **k: pytest.fail("host read"))
        norm = clip_grad_norm_(ours, 1.0, Layout())
    assert isinstance(norm, torch.Tensor)
    torch.testing.assert_close(norm.to(expected.dtype), expected)
    for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad)


def test_fsdp2_gradients_are_clipped_through_their_local_shards(one_rank_group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    plain = copy.deepcopy(model)
    fully_shard(model, mesh=init_device_mesh("cpu", (1,)))
    torch.manual_seed(0)
    x = torch.randn(4, 16)
    (model(x).sum() * 100.0).backward()
    (plain(x).sum() * 100.0).backward()
    assert all(isinstance(p.grad, DTensor) for p in model.parameters())
    norm = clip_grad_norm_(model, 1.0, Layout(zero=3))
    expected = torch.nn.utils.clip_grad_norm_(plain.parameters(), 1.0)
    torch.testing.assert_close(norm.to(expected.dtype), expected)
    for a, b in zip(model.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(a.grad.full_tensor(), b.grad)
    assert float(norm) > 1.0  # the clip acted
