"""Our GPT built from Hugging Face GPT-2 configs and weights gives transformers' logits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from accelbench.analytics.params import total_params
from accelbench.config.errors import ConfigError
from accelbench.models.convert_hf_gpt2 import (
    gpt_from_hf_gpt2,
    gpt_from_pretrained_dir,
    hf_gpt2_to_our_state_dict,
    load_hf_gpt2_state_dict,
    model_config_from_hf_gpt2,
)
from accelbench.models.gpt import GPT

TINY = dict(n_layer=2, n_head=4, n_embd=64, vocab_size=50257, n_positions=128,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def _hf_model(attn: str = "sdpa", **changes) -> GPT2LMHeadModel:
    """A randomly initialised GPT2LMHeadModel (biases and norms randomised too), eval mode."""
    config = GPT2Config(**{**TINY, **changes})
    config._attn_implementation = attn
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # HF zero-inits biases and sets norms to 1: make every tensor count
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def _ids() -> torch.Tensor:
    return torch.randint(0, 50257, (2, 37), generator=torch.Generator().manual_seed(1))


def _assert_same_logits(hf: GPT2LMHeadModel, ours: GPT) -> None:
    ids = _ids()
    with torch.no_grad():
        want = hf(ids).logits
        got = ours.eval()(ids)
    assert got.shape == want.shape == (2, 37, hf.config.vocab_size)
    assert torch.allclose(got, want, atol=1e-5, rtol=0), (got - want).abs().max()


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_logits_match_transformers(attn: str) -> None:
    hf = _hf_model(attn)
    assert hf.config._attn_implementation == attn
    ours = gpt_from_hf_gpt2(hf.config, hf.state_dict())
    assert ours.cfg.d_ff == 0 and ours.cfg.activation == "gelu_tanh" and ours.cfg.tie_embeddings
    assert ours.num_params() == sum(p.numel() for p in hf.parameters()) == total_params(ours.cfg)
    _assert_same_logits(hf, ours)


def test_untied_head_exact_gelu_and_custom_inner() -> None:
    hf = _hf_model("eager", tie_word_embeddings=False, activation_function="gelu", n_inner=96,
                   layer_norm_epsilon=1e-6)
    assert hf.lm_head.weight.data_ptr() != hf.transformer.wte.weight.data_ptr()
    ours = gpt_from_hf_gpt2(hf.config.to_dict(), hf.state_dict())
    cfg = ours.cfg
    assert (cfg.ffn_dim, cfg.activation, cfg.tie_embeddings, cfg.layer_norm_eps) == (
        96, "gelu", False, 1e-6)
    _assert_same_logits(hf, ours)


def test_conv1d_weights_are_transposed() -> None:
    hf = _hf_model()
    ours = hf_gpt2_to_our_state_dict(hf.state_dict())
    conv = hf.transformer.h[0].attn.c_attn.weight  # Conv1D: (in, out) = (64, 192)
    assert tuple(conv.shape) == (64, 192)
    assert torch.equal(ours["h.0.attn.c_attn.weight"], conv.t())
    assert "h.0.attn.bias" not in ours and "wpe.weight" in ours


@pytest.mark.parametrize("safe", [True, False])
def test_round_trip_through_pretrained_dir(tmp_path: Path, safe: bool) -> None:
    hf = _hf_model()
    if safe:
        hf.save_pretrained(tmp_path)
        assert (tmp_path / "model.safetensors").is_file()
    else:  # the legacy layout: config.json and a pickled state dict (with the mask buffers)
        hf.config.save_pretrained(tmp_path)
        state = dict(hf.state_dict())
        state["transformer.h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 128, 128))
        torch.save(state, tmp_path / "pytorch_model.bin")
    ours = gpt_from_pretrained_dir(tmp_path)
    assert ours.cfg.name == tmp_path.name
    _assert_same_logits(hf, ours)


def test_config_from_json_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**TINY, "n_inner": None}))
    cfg = model_config_from_hf_gpt2(tmp_path / "config.json", name="mine")
    assert (cfg.name, cfg.n_layer, cfg.n_head, cfg.d_model, cfg.ffn_dim, cfg.n_positions) == (
        "mine", 2, 4, 64, 256, 128)
    assert model_config_from_hf_gpt2(tmp_path) == cfg.with_changes(name=tmp_path.name)


@pytest.mark.parametrize(("change", "field"), [
    ({"activation_function": "relu"}, "activation_function"),
    ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
    ({"reorder_and_upcast_attn": True}, "reorder_and_upcast_attn"),
    ({"scale_attn_weights": False}, "scale_attn_weights"),
    ({"add_cross_attention": True}, "add_cross_attention"),
    ({"model_type": "gpt_neox"}, "model_type"),
    ({"n_head": 5}, "model.n_head"),
])
def test_unsupported_configs_name_the_field(change: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        model_config_from_hf_gpt2({**TINY, **change})
    assert err.value.field.endswith(field)
    assert field in str(err.value)


def test_mismatched_checkpoint_is_a_config_error(tmp_path: Path) -> None:
    hf = _hf_model()
    model = GPT(model_config_from_hf_gpt2({**TINY, "n_embd": 128}))
    with pytest.raises(ConfigError, match="shape"):
        load_hf_gpt2_state_dict(model, hf.state_dict())
    with pytest.raises(ConfigError, match="config.json"):
        gpt_from_pretrained_dir(tmp_path)
    hf.config.save_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="no weights"):
        gpt_from_pretrained_dir(tmp_path)
