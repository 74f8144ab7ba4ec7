"""The chunked head + cross-entropy (`--loss-impl chunked`, models/chunked_loss.py) gives the
standard path's loss and gradients: in fp32 to float rounding (chunks that split the tokens
unevenly, the vocabulary's padding rows, a tied embedding), and under bf16 autocast within
bf16's rounding of the logits."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from accelbench.config.presets import get_preset
from accelbench.models.chunked_loss import chunked_cross_entropy
from accelbench.models.gpt import GPT


def _tiny(vocab: int = 1000):
    cfg = get_preset("gpt2-tiny")
    return dataclasses.replace(cfg, vocab_size=vocab)  # odd vocabulary: padded rows


def _loss_and_grads(model: GPT, x, y, impl: str, autocast: bool):
    model.zero_grad(set_to_none=True)
    model.set_loss_impl(impl)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits, loss = model(x, y)
    loss.backward()
    return logits, loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _chunked(model: GPT, x, y, autocast: bool, chunk_tokens: int = 16):
    """The chunked path with small chunks (111 tokens: the last chunk short)."""
    import accelbench.models.gpt as gpt_module

    original = gpt_module.chunked_cross_entropy
    gpt_module.chunked_cross_entropy = lambda h, head, t, v: original(h, head, t, v,
                                                                      chunk_tokens)
    try:
        return _loss_and_grads(model, x, y, "chunked", autocast)
    finally:
        gpt_module.chunked_cross_entropy = original


def _batch(seed: int):
    torch.manual_seed(seed)
    model = GPT(_tiny())
    return model, torch.randint(0, 1000, (3, 37)), torch.randint(0, 1000, (3, 37))


def test_chunked_loss_equals_the_standard_loss_and_gradients_in_fp32():
    model, x, y = _batch(0)
    _, ref_loss, ref = _loss_and_grads(model, x, y, "torch", False)
    logits, loss, got = _chunked(model, x, y, False)
    assert logits is None  # never held whole
    torch.testing.assert_close(loss, ref_loss, rtol=1e-6, atol=1e-6)
    assert model.lm_head.weight is model.wte.weight  # tied: one gradient, both uses summed
    for name, grad in ref.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-5, atol=1e-6, msg=name)
    assert got["wte.weight"][1000:].abs().max() == 0  # the padding rows get no gradient


def test_under_bf16_autocast_it_is_as_close_to_fp32_as_the_standard_path():
    """Both bf16 paths round the logits and their gradient to bf16 (at different points:
    torch's loss scales by 1/tokens before the cast, the chunked one after), so neither equals
    the other bit for bit; each gradient's error against the fp32 reference is bf16 rounding
    (under 2%), and the chunked path's is within 1.5x the standard path's."""
    model, x, y = _batch(0)
    _, fp32_loss, fp32 = _loss_and_grads(model, x, y, "torch", False)
    _, ref_loss, ref = _loss_and_grads(model, x, y, "torch", True)
    _, loss, got = _chunked(model, x, y, True)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(loss, fp32_loss, rtol=1e-2, atol=1e-2)
    for name, truth in fp32.items():
        standard = ((ref[name] - truth).norm() / truth.norm()).item()
        chunked = ((got[name] - truth).norm() / truth.norm()).item()
        assert chunked < 0.02 and chunked < 1.5 * standard + 1e-4, (name, chunked, standard)


def test_the_chunked_loss_refuses_a_head_with_bias():
    head = torch.nn.Linear(8, 16)
    with pytest.raises(ValueError, match="without bias"):
        chunked_cross_entropy(torch.zeros(2, 8), head, torch.zeros(2, dtype=torch.long), 16)


def test_an_unknown_loss_impl_is_refused():
    with pytest.raises(ValueError, match="loss_impl must be one of"):
        GPT(_tiny()).set_loss_impl("fused")


@pytest.mark.slow
def test_a_training_cell_with_the_chunked_loss_has_the_standard_cells_losses():
    """Through the runner (its step hook sets the model's loss): an fp32 cell's per-step losses
    equal the standard loss's to float rounding over 4 steps, and the record says which ran."""
    from accelbench.bench.gemm_peak import SweepPeak
    from accelbench.bench.train.spec import TrainSpec
    from accelbench.bench.train.sweep import run_train_sweep

    model = get_preset("gpt2-tiny").with_changes(vocab_size=500, n_positions=64)
    base = dict(model=model, seq_lens=(32,), micro_batches=(2,), dtypes=("fp32",), steps=4,
                warmup_steps=1, device="cpu", trials=1,
                peaks=(SweepPeak("fp32", 1e11, "fp32", "given"),))
    runs = {}
    for impl in ("torch", "chunked"):
        (outcome,) = run_train_sweep(TrainSpec(**base, loss_impl=impl), lambda o: None)
        assert outcome.status == "ok" and outcome.spec["loss_impl"] == impl
        runs[impl] = outcome.raw["rank0"]["loss"]
    torch.testing.assert_close(runs["chunked"], runs["torch"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["tp=2", "pp=2", "dp=2,zero=2"])
def test_the_chunked_loss_on_a_layout_it_is_not_built_for_is_one_line(layout):
    from accelbench.bench.train.loss_impl import validate_loss_impl
    from accelbench.config.errors import ConfigError
    from accelbench.config.layout_parse import RUNTIME_KEYS, parse_layout

    with pytest.raises(ConfigError) as err:
        validate_loss_impl("chunked", parse_layout(layout, RUNTIME_KEYS))
    assert str(err.value).startswith("loss-impl: chunked with layout") and "\n" not in str(
        err.value)
    validate_loss_impl("chunked", parse_layout("dp=2,zero=1", RUNTIME_KEYS))  # DDP, ZeRO-1: run
