"""Hugging Face Llama, Mistral and Qwen2 checkpoints through `--model hf:DIR`: our decoder gives
transformers' own logits on the same weights (eval mode, fp32); `hf-config:FILE` builds the shape
alone; an unsupported model_type is one line and exit 2."""

import json
from pathlib import Path

import pytest
import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from accelbench.analytics.params import total_params
from accelbench.bench.train.spec import resolve_model_source
from accelbench.config.errors import ConfigError
from accelbench.models.convert_hf import gpt_from_hf_dir, load_pretrained_weights
from accelbench.models.gpt import GPT
from tests.unit.cli_run import run_main

SHAPE = {"vocab_size": 211, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128}
LLAMA31_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 16,
                "rope_theta": 500000.0}
PEERS = {
    "llama-gqa": (LlamaConfig, LlamaForCausalLM, {}),
    "llama-mha-tied": (LlamaConfig, LlamaForCausalLM,
                       {"num_key_value_heads": 4, "tie_word_embeddings": True}),
    "llama3.1-rope": (LlamaConfig, LlamaForCausalLM, {"rope_parameters": LLAMA31_ROPE}),
    "llama-biases": (LlamaConfig, LlamaForCausalLM, {"attention_bias": True, "mlp_bias": True}),
    "mistral": (MistralConfig, MistralForCausalLM, {"sliding_window": 4096}),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM, {"num_key_value_heads": 1}),
}


def _save_peer(kind: str, folder: Path):
    """A tiny random transformers model of `kind`, saved with save_pretrained into folder."""
    config_cls, model_cls, extra = PEERS[kind]
    torch.manual_seed(0)
    theirs = model_cls(config_cls(**{**SHAPE, **extra})).eval()
    with torch.no_grad():  # random norm weights and biases, so that a mix-up shows
        for name, p in theirs.named_parameters():
            if name.endswith("norm.weight") or name.endswith("bias"):
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.1)
    theirs.save_pretrained(folder)
    return theirs


@pytest.mark.parametrize("kind", PEERS)
def test_logits_equal_transformers(kind, tmp_path):
    theirs = _save_peer(kind, tmp_path)
    cfg, checkpoint = resolve_model_source(f"hf:{tmp_path}")
    ours = GPT(cfg)
    load_pretrained_weights(ours, checkpoint)
    ours.eval()
    idx = torch.randint(0, SHAPE["vocab_size"], (2, 48), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = theirs(idx).logits
        got = ours(idx)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert ours.num_params() == theirs.num_parameters() == total_params(cfg)


def test_qwen2_has_qkv_biases_only(tmp_path):
    _save_peer("qwen2", tmp_path)
    model = gpt_from_hf_dir(tmp_path)
    biases = sorted({n.split(".", 2)[2] for n, _ in model.named_parameters() if "bias" in n})
    assert biases == ["attn.c_attn.bias"]


def test_hf_config_builds_the_shape_alone(tmp_path):
    LlamaConfig(**SHAPE, rope_parameters=LLAMA31_ROPE).save_pretrained(tmp_path)
    cfg, checkpoint = resolve_model_source(f"hf-config:{tmp_path / 'config.json'}")
    assert checkpoint is None
    assert (cfg.n_layer, cfg.n_head, cfg.kv_heads, cfg.d_model, cfg.ffn_dim, cfg.vocab_size) == (
        2, 4, 2, 64, 96, 211)
    assert (cfg.norm, cfg.activation, cfg.bias, cfg.tie_embeddings) == (
        "rmsnorm", "swiglu", False, False)
    assert (cfg.rope_scaling, cfg.rotary_base, cfg.rope_original_positions) == (
        "llama3", 500000.0, 16)


def test_hf_config_reads_transformers4_rope_fields(tmp_path):
    """Released Llama 3.1 config.json files carry rope_theta and rope_scaling (transformers 4)."""
    raw = {"model_type": "llama", **SHAPE, "rope_theta": 500000.0,
           "rope_scaling": {k: v for k, v in LLAMA31_ROPE.items() if k != "rope_theta"}}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    cfg, _ = resolve_model_source(f"hf-config:{tmp_path / 'config.json'}")
    assert (cfg.rope_scaling, cfg.rotary_base, cfg.rope_factor) == ("llama3", 500000.0, 8.0)


@pytest.mark.parametrize("change,field", [
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"head_dim": 32}, "head_dim"),
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, "rope_type"),
    ({"attention_bias": True}, "attention_bias"),
    ({"model_type": "qwen2", "use_sliding_window": True}, "use_sliding_window"),
])
def test_unsupported_switches_name_the_field(change, field, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", **SHAPE} | change))
    with pytest.raises(ConfigError) as err:
        resolve_model_source(f"hf-config:{tmp_path / 'config.json'}")
    assert err.value.field.endswith(field)


def test_unsupported_model_type_is_one_line_exit_2(monkeypatch, capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", **SHAPE}))
    code, out, err = run_main(monkeypatch, capsys, "train", "--model", f"hf:{tmp_path}",
                              "--db", str(tmp_path / "r.db"))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"error: {tmp_path}: model_type: 'bert' is not supported (allowed: gpt2, gpt_neox, "
        "llama, mistral, qwen2, mixtral, qwen2_moe)"]
    assert not (tmp_path / "r.db").exists()


def test_hf_config_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no config file"):
        resolve_model_source(f"hf-config:{tmp_path / 'nothing.json'}")


def test_training_starts_from_a_llama_checkpoint(tmp_path):
    """The runner's build loads the checkpoint: its first loss is transformers' loss."""
    from accelbench.bench.train.build import build_trainer
    from accelbench.bench.train.spec import TrainSpec
    from accelbench.config.layout import Layout

    theirs = _save_peer("llama-gqa", tmp_path)
    cfg, checkpoint = resolve_model_source(f"hf:{tmp_path}")
    spec = TrainSpec(cfg, seq_lens=(32,), micro_batches=(2,), dtypes=("fp32",), steps=1,
                     warmup_steps=0, device="cpu", init_checkpoint=checkpoint)
    trainer = build_trainer(spec, spec.cells()[0], Layout(), torch.device("cpu"))
    idx = torch.randint(0, SHAPE["vocab_size"], (2, 33))
    _, loss = trainer.module(idx[:, :-1], idx[:, 1:])
    with torch.no_grad():
        logits = theirs(idx[:, :-1]).logits
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, SHAPE["vocab_size"]),
                                                 idx[:, 1:].reshape(-1))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


@pytest.mark.parametrize("kind", ["gpt2", "gpt_neox"])
def test_older_families_dispatch_by_model_type(kind, tmp_path):
    """GPT-2 and GPT-NeoX folders go through the same hf:DIR entry point, logits equal too."""
    import transformers

    torch.manual_seed(0)
    if kind == "gpt2":
        theirs = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=211, n_positions=64, n_embd=64, n_layer=2, n_head=4))
    else:
        theirs = transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
            vocab_size=211, hidden_size=64, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=64, rotary_pct=0.25))
    theirs.eval().save_pretrained(tmp_path)
    ours = gpt_from_hf_dir(tmp_path).eval()
    idx = torch.randint(0, 211, (2, 40))
    with torch.no_grad():
        torch.testing.assert_close(ours(idx), theirs(idx).logits, rtol=1e-5, atol=1e-5)
