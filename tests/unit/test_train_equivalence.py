"""Gradient accumulation and activation recompute change speed and memory, never the maths."""

import pytest
import torch

from accelbench.config.presets import get_preset
from accelbench.models.gpt import GPT

CFG = get_preset("gpt2-tiny").with_changes(vocab_size=512, n_positions=64)


def _grads(model, batches):
    """Mean loss over micro-batches and the accumulated gradients, as the training step does."""
    model.zero_grad(set_to_none=True)
    total = 0.0
    for x, y in batches:
        _, loss = model(x, y)
        (loss / len(batches)).backward()
        total += loss.item() / len(batches)
    return total, {n: p.grad.clone() for n, p in model.named_parameters()}


def _data(batch, seq=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, CFG.vocab_size, (batch, seq + 1), generator=g)
    return ids[:, :-1], ids[:, 1:]


def test_gas_2_of_micro_batch_4_equals_micro_batch_8():
    """Tolerance: 1e-5 relative to the gradient's scale (fp32 summation order differs)."""
    torch.manual_seed(0)
    model = GPT(CFG)
    x, y = _data(8)
    loss_big, grads_big = _grads(model, [(x, y)])
    loss_acc, grads_acc = _grads(model, [(x[:4], y[:4]), (x[4:], y[4:])])
    assert loss_acc == pytest.approx(loss_big, rel=1e-6)
    for name, g in grads_big.items():
        torch.testing.assert_close(grads_acc[name], g, rtol=1e-5, atol=1e-5 * g.abs().max())


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["selective", "full"])
def test_recompute_gives_the_loss_and_gradients_of_no_recompute(mode):
    torch.manual_seed(0)
    model = GPT(CFG)
    x, y = _data(4)
    loss_ref, grads_ref = _grads(model, [(x, y)])
    model.set_recompute(mode)
    loss, grads = _grads(model, [(x, y)])
    assert loss == loss_ref
    for name, g in grads_ref.items():
        torch.testing.assert_close(grads[name], g, rtol=1e-6, atol=1e-7)


def test_recompute_really_reruns_the_forward():
    """Full recompute runs each block's forward twice per step (once more in backward)."""
    model = GPT(CFG)
    calls = []
    model.h[0].mlp.c_fc.register_forward_pre_hook(lambda *a: calls.append(1))
    x, y = _data(2)
    _grads(model, [(x, y)])
    assert len(calls) == 1
    model.set_recompute("full")
    calls.clear()
    _grads(model, [(x, y)])
    assert len(calls) == 2
