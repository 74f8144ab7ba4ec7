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
    # a divisor of 2 on a one-rank group: the reduce runs (a group of one dividing by 1 has
    # nothing to do and skips it: test_a_group_of_one_with_nothing_to_divide_sends_nothing)
    sync = DataParallelGradSync(model, one_rank_group, 2)
    x = torch.randn(2, 5, 4)
    with sync.no_sync():
        model(x[0]).sum().backward()
    assert calls == []  # an earlier micro-batch accumulates locally
    model(x[1]).sum().backward()
    assert calls == [4 * 3 + 3 + 3 * 2 + 2]  # one flat reduce of every gradient
    for i in range(2):
        plain(x[i]).sum().backward()
    for ours, theirs in zip(model.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad / 2)  # accumulated, then divided
    model.zero_grad(set_to_none=True)
    model(x[0]).sum().backward()
    assert len(calls) == 2  # the next step syncs again


def test_a_group_of_one_with_nothing_to_divide_sends_nothing(one_rank_group, monkeypatch):
    """dp = 1 (tp's sp MoE sum alone needs the sync): no all-reduce, gradients untouched."""
    calls = []
    monkeypatch.setattr(grad_sync.dist, "all_reduce", lambda t, group=None: calls.append(t))
    model = torch.nn.Linear(4, 3)
    DataParallelGradSync(model, one_rank_group, 1)
    plain = copy.deepcopy(model)
    x = torch.randn(5, 4)
    model(x).sum().backward()
    plain(x).sum().backward()
    assert calls == []
    torch.testing.assert_close(model.weight.grad, plain.weight.grad)
