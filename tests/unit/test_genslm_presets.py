"""GenSLM presets, the GPT-NeoX config reader, and our model against Hugging Face's GPT-NeoX."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from accelbench.analytics.params import total_params
from accelbench.config import get_preset
from accelbench.config.errors import ConfigError
from accelbench.config.presets_genslm import (
    GENSLM_ASSETS,
    model_from_neox_config,
    neox_config_files,
)
from accelbench.data.codon import CodonTokenizer
from accelbench.data.fasta import builtin_genomes, read_fasta
from accelbench.models.convert_neox import load_neox_state_dict, neox_qkv_to_ours
from accelbench.models.gpt import GPT

NEOX_PRESETS = ("genslm-25m", "genslm-250m", "genslm-2.5b", "genslm-25b")


def test_parameter_counts_match_genslm_file_names() -> None:
    # GenSLM names its files by parameter count: neox_25,290,752 and neox_2,533,931,008.
    assert total_params(get_preset("genslm-25m")) == 25_290_752
    assert total_params(get_preset("genslm-2.5b")) == 2_533_931_008
    torch.manual_seed(0)
    assert GPT(get_preset("genslm-25m")).num_params() == 25_290_752


@pytest.mark.parametrize("name", NEOX_PRESETS)
def test_neox_presets_share_genslm_architecture(name: str) -> None:
    short, long = get_preset(name), get_preset(f"{name}-10k")
    for cfg in (short, long):
        assert cfg.vocab_size == 69 and cfg.position == "rotary" and cfg.rotary_pct == 0.25
        assert cfg.parallel_residual and not cfg.tie_embeddings
        assert cfg.activation == "gelu_tanh" and cfg.layer_norm_eps == 1e-5
    assert (short.n_positions, long.n_positions) == (2048, 10240)
    assert total_params(short) == total_params(long)  # rotary: no position parameters


def test_shapes() -> None:
    shapes = {n: (c.d_model, c.n_layer, c.n_head, c.ffn_dim)
              for n in NEOX_PRESETS for c in [get_preset(n)]}
    assert shapes == {"genslm-25m": (512, 8, 8, 2048), "genslm-250m": (1840, 12, 16, 2048),
                      "genslm-2.5b": (3840, 28, 32, 4096), "genslm-25b": (8192, 64, 64, 8000)}
    big = get_preset("genslm-13b")
    assert (big.n_layer, big.n_head, big.d_model, big.vocab_size, big.n_positions) == (
        44, 64, 4992, 71, 1024)
    assert big.head_dim == 78 and 4992 == 64 * 78
    xl = get_preset("genslm-1.5b")
    assert (xl.n_layer, xl.n_head, xl.d_model, xl.vocab_size, xl.n_positions) == (
        24, 16, 2048, 70, 10240)
    assert xl.position == big.position == "learned"  # the study's GPT-3-style models


def test_shipped_neox_files_build_the_presets() -> None:
    expected = {
        "neox_25,290,752": "genslm-25m", "neox_25,290,752_10240_pos_embed": "genslm-25m-10k",
        "neox_244,464,576": "genslm-250m", "neox_244,464,576_10240_pos_embed": "genslm-250m-10k",
        "neox_2,533,931,008": "genslm-2.5b",
    }
    files = {p.stem: p for p in neox_config_files()}
    assert set(files) == set(expected) | {"neox_25,076,188,032"}
    for stem, preset in expected.items():
        cfg = model_from_neox_config(files[stem])
        assert cfg.name == stem
        assert dataclasses.replace(cfg, name=preset) == get_preset(preset)


def test_25b_file_with_8196_fails_clearly() -> None:
    path = GENSLM_ASSETS / "neox_25,076,188,032.json"
    assert json.loads(path.read_text())["hidden_size"] == 8196
    with pytest.raises(ConfigError, match=r"64 attention heads do not divide hidden_size 8196"):
        model_from_neox_config(path)


def test_reader_defaults_and_literals(tmp_path: Path) -> None:
    raw = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
           "intermediate_size": 256, "vocab_size": 69}
    cfg = model_from_neox_config(raw, name="tiny")
    assert (cfg.n_positions, cfg.rotary_pct, cfg.parallel_residual, cfg.tie_embeddings,
            cfg.activation) == (2048, 0.25, True, False, "gelu")
    # GenSLM's real 25B file has a bare Python `True`; accept it as JSON's true.
    path = tmp_path / "neox.json"
    path.write_text(json.dumps(raw)[:-1] + ', "use_deepspeed_checkpointing": True, '
                    '"note": "True stays a string", "use_parallel_residual": False}')
    assert model_from_neox_config(path).parallel_residual is False
    assert model_from_neox_config({**raw, "rotary_emb_base": 500000}).rotary_base == 500000
    bad = [({"hidden_act": "relu"}, "hidden_act"), ({"model_type": "gpt2"}, "model_type"),
           ({"attention_bias": False}, "attention_bias"),
           ({"rotary_pct": 0.2}, "rotary_pct")]
    for change, field in bad:
        with pytest.raises(ConfigError, match=field):
            model_from_neox_config({**raw, **change})
    with pytest.raises(ConfigError, match="missing intermediate_size"):
        model_from_neox_config({k: v for k, v in raw.items() if k != "intermediate_size"})


def test_qkv_reorder_by_hand() -> None:
    # 2 heads of width 1: NeoX rows are [q0, k0, v0, q1, k1, v1]; ours [q0, q1, k0, k1, v0, v1].
    neox = torch.tensor([10.0, 20.0, 30.0, 11.0, 21.0, 31.0])
    assert neox_qkv_to_ours(neox, 2).tolist() == [10.0, 11.0, 20.0, 21.0, 30.0, 31.0]


def _randomised_hf_neox(parallel: bool, base: float = 10000.0):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    hf_cfg = GPTNeoXConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                           intermediate_size=256, vocab_size=69, rotary_pct=0.25,
                           max_position_embeddings=128, hidden_act="gelu_fast",
                           use_parallel_residual=parallel, tie_word_embeddings=False,
                           rotary_emb_base=base)
    torch.manual_seed(1)
    model = GPTNeoXForCausalLM(hf_cfg).eval()
    with torch.no_grad():  # random biases and norms too, so a mislaid one shows
        for p in model.parameters():
            p.normal_(0.0, 0.2)
    return hf_cfg, model


@pytest.mark.parametrize("parallel,base", [(True, 10000.0), (False, 10000.0), (True, 50.0)])
def test_same_logits_as_hugging_face_neox(parallel: bool, base: float) -> None:
    hf_cfg, hf_model = _randomised_hf_neox(parallel, base)
    cfg = model_from_neox_config(hf_cfg.to_dict(), name="tiny-neox")
    assert cfg.parallel_residual is parallel and cfg.rotary_pct == 0.25
    assert cfg.rotary_base == base  # a base other than NeoX's default is built, not refused
    ours = GPT(cfg).eval()
    load_neox_state_dict(ours, hf_model.state_dict())
    ids = torch.tensor([CodonTokenizer().encode(read_fasta(builtin_genomes()[0])[0].sequence)[:48]])
    with torch.no_grad():
        expected, got = hf_model(ids).logits, ours(ids)
    assert expected.abs().max() > 1.0
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    # The reorder matters: loading QKV in NeoX's layout unchanged gives other logits.
    state = ours.state_dict()
    for i in range(cfg.n_layer):
        for leaf in ("weight", "bias"):
            key = f"gpt_neox.layers.{i}.attention.query_key_value.{leaf}"
            state[f"h.{i}.attn.c_attn.{leaf}"] = hf_model.state_dict()[key]
    ours.load_state_dict(state)
    with torch.no_grad():
        assert (ours(ids) - expected).abs().max() > 1e-2


def test_genslm_model_trains_on_real_codons() -> None:
    cfg = get_preset("genslm-25m").with_changes(name="genslm-tiny", n_layer=2, n_head=4,
                                                d_model=64, d_ff=128)
    torch.manual_seed(0)
    model = GPT(cfg)
    ids = CodonTokenizer().encode(read_fasta(builtin_genomes()[0])[0].sequence)[:257]
    batch = torch.tensor([ids])
    _, loss = model(batch[:, :-1], batch[:, 1:])
    loss.backward()
    assert torch.isfinite(loss) and abs(loss.item() - torch.log(torch.tensor(69.0)).item()) < 0.5
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert model.wte.weight.grad.abs().sum() > 0


def test_command_line_builds_a_model_from_a_neox_file() -> None:
    """--model neox:FILE: a user's GPT-NeoX config.json; the published 25B one fails clearly."""
    from accelbench.bench.train.spec import resolve_model_source

    cfg, checkpoint = resolve_model_source(f"neox:{GENSLM_ASSETS / 'neox_25,290,752.json'}")
    assert total_params(cfg) == 25_290_752 and checkpoint is None
    with pytest.raises(ConfigError, match="8196"):
        resolve_model_source(f"neox:{GENSLM_ASSETS / 'neox_25,076,188,032.json'}")
    with pytest.raises(ConfigError, match="no GPT-NeoX config file"):
        resolve_model_source("neox:/no/such/config.json")
