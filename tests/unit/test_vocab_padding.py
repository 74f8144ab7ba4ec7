"""The vocabulary's padding rows (ModelConfig.padded_vocab): the head's GEMMs get aligned
shapes, and nothing a user sees changes: logits, loss, gradients and parameter counts are
those of the real vocabulary."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from accelbench.analytics.params import total_params
from accelbench.config.model import VOCAB_MULTIPLE
from accelbench.config.presets import get_preset, resolve_model
from accelbench.models.gpt import GPT, pad_vocab_rows


def test_rows_round_up_to_the_multiple_and_no_further() -> None:
    assert get_preset("gpt2-xl").padded_vocab == 50304  # 50257 -> 786 x 64
    assert get_preset("llama3-8b").padded_vocab == 128256  # already a multiple
    assert resolve_model("gpt2-tiny:vocab=64").padded_vocab == 64
    assert resolve_model("gpt2-tiny:vocab=65").padded_vocab == 2 * VOCAB_MULTIPLE


def test_logits_loss_and_gradients_are_those_of_the_real_vocabulary() -> None:
    cfg = resolve_model("gpt2-tiny:layers=1")
    torch.manual_seed(0)
    model = GPT(cfg)
    assert model.lm_head.weight.shape[0] == cfg.padded_vocab > cfg.vocab_size
    assert not model.wte.weight[cfg.vocab_size:].any()  # padding rows start at zero
    x = torch.randint(0, cfg.vocab_size, (2, 16))
    logits, loss = model(x, x)
    assert logits.shape == (2, 16, cfg.vocab_size)
    hidden = model.ln_f(model.h[0](model.embed(x)))
    expected = hidden @ model.lm_head.weight[: cfg.vocab_size].T  # the head without padding
    torch.testing.assert_close(logits, expected)
    torch.testing.assert_close(loss, F.cross_entropy(expected.reshape(-1, cfg.vocab_size),
                                                     x.reshape(-1)))
    loss.backward()
    grad = model.lm_head.weight.grad  # tied: the embedding's gradient too
    assert not grad[cfg.vocab_size:].any() and grad[: cfg.vocab_size].any()


def test_parameter_count_leaves_the_padding_out() -> None:
    for name in ("gpt2-tiny", "genslm-25m"):
        cfg = resolve_model(name)
        assert GPT(cfg).num_params() == total_params(cfg), name
    untied = resolve_model("llama-tiny:vocab=1000")  # padded to 1024, head and embedding
    assert not untied.tie_embeddings
    assert GPT(untied).num_params() == total_params(untied)


def test_a_checkpoint_of_the_real_vocabulary_is_padded_with_zero_rows() -> None:
    cfg = get_preset("gpt2-tiny")
    head = torch.randn(cfg.vocab_size, cfg.d_model)
    state = {"wte.weight": head, "lm_head.weight": head, "ln_f.weight": torch.ones(3)}
    pad_vocab_rows(state, cfg)
    for key in ("wte.weight", "lm_head.weight"):
        assert state[key].shape == (cfg.padded_vocab, cfg.d_model)
        torch.testing.assert_close(state[key][: cfg.vocab_size], head)
        assert not state[key][cfg.vocab_size:].any()
    assert state["ln_f.weight"].shape == (3,)

