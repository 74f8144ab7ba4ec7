"""DataParallelGradSync: one all-reduce per step, after the last micro-batch's backward."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist

from accelbench.parallel import grad_sync
from accelbench.parallel.grad_sync import DataParallelGradSync


def test_one_reduce_per_step_after_every_gradient(one_rank_group, monkeypatch):
    calls = []
    real = dist.all_reduce

    def counting(tensor, group=None):
        calls.append(tensor.numel())
        return real(tensor, group=group)

    monkeypatch.setattr(grad_sync.dist, "all_reduce", counting)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    plain = copy.deepcopy(model)
    sync = DataParallelGradSync(model, one_rank_group, 1)
    x = torch.randn(2, 5, 4)
    with sync.no_sync():
        model(x[0]).sum().backward()
    assert calls == []  # an earlier micro-batch accumulates locally
    model(x[1]).sum().backward()
    assert calls == [4 * 3 + 3 + 3 * 2 + 2]  # one flat reduce of every gradient
    for i in range(2):
        plain(x[i]).sum().backward()
    for ours, theirs in zip(model.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad)  # accumulated, averaged over 1 rank
    model.zero_grad(set_to_none=True)
    model(x[0]).sum().backward()
    assert len(calls) == 2  # the next step syncs again
