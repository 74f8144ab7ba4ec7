"""Hugging Face Mixtral and Qwen-MoE checkpoints through `--model hf:DIR`: our decoder gives
transformers' own logits on the same weights (eval mode, fp32), with Mixtral's softmax, top-k
and renormalisation, and Qwen-MoE's norm_topk_prob, shared expert with its sigmoid gate and
dense layers; the load-balancing loss equals MixtralForCausalLM's aux_loss; shapes we do not
build are refused naming the field."""

import json

import pytest
import torch
from transformers import MixtralConfig, MixtralForCausalLM, Qwen2MoeConfig, Qwen2MoeForCausalLM

from accelbench.analytics.params import total_params
from accelbench.bench.train.spec import resolve_model_source
from accelbench.config.errors import ConfigError
from accelbench.models.convert_hf import load_pretrained_weights
from accelbench.models.gpt import GPT
from accelbench.models.moe import moe_layers

SHAPE = {"vocab_size": 97, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "max_position_embeddings": 128}
PEERS = {
    "mixtral": (MixtralConfig, MixtralForCausalLM,
                {"intermediate_size": 48, "num_local_experts": 4, "num_experts_per_tok": 2}),
    "mixtral-top1": (MixtralConfig, MixtralForCausalLM,
                     {"intermediate_size": 48, "num_local_experts": 3, "num_experts_per_tok": 1}),
    "qwen2_moe": (Qwen2MoeConfig, Qwen2MoeForCausalLM,
                  {"intermediate_size": 96, "moe_intermediate_size": 32, "num_experts": 4,
                   "num_experts_per_tok": 2, "shared_expert_intermediate_size": 64,
                   "norm_topk_prob": False}),
    "qwen2_moe-dense-first": (Qwen2MoeConfig, Qwen2MoeForCausalLM,
                              {"intermediate_size": 96, "moe_intermediate_size": 32,
                               "num_experts": 6, "num_experts_per_tok": 3,
                               "shared_expert_intermediate_size": 32, "norm_topk_prob": True,
                               "num_hidden_layers": 5, "mlp_only_layers": [0],
                               "decoder_sparse_step": 2}),
}


def _save_peer(kind: str, folder):
    """A tiny random transformers MoE of `kind` saved with save_pretrained into folder."""
    config_cls, model_cls, extra = PEERS[kind]
    torch.manual_seed(0)
    theirs = model_cls(config_cls(**{**SHAPE, **extra})).eval()
    with torch.no_grad():  # random norms and biases, and routers that differ between tokens
        for name, p in theirs.named_parameters():
            if name.endswith("norm.weight") or name.endswith("bias"):
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.1)
            elif name.endswith("gate.weight"):
                p.normal_(0.0, 0.5)
    theirs.save_pretrained(folder)
    return theirs


def _ours(folder) -> GPT:
    cfg, checkpoint = resolve_model_source(f"hf:{folder}")
    ours = GPT(cfg)
    load_pretrained_weights(ours, checkpoint)
    return ours.eval()


@pytest.mark.parametrize("kind", PEERS)
def test_logits_equal_transformers(kind, tmp_path):
    theirs = _save_peer(kind, tmp_path)
    ours = _ours(tmp_path)
    idx = torch.randint(0, SHAPE["vocab_size"], (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = theirs(idx).logits
        got = ours(idx)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert ours.num_params() == theirs.num_parameters() == total_params(ours.cfg)


def test_qwen_moe_layers_and_shared_expert(tmp_path):
    _save_peer("qwen2_moe-dense-first", tmp_path)
    cfg = _ours(tmp_path).cfg
    assert (cfg.moe_first_dense, cfg.moe_every, cfg.n_shared_experts, cfg.moe_shared_gate,
            cfg.moe_norm_topk, cfg.qkv_bias) == (1, 2, 1, True, True, True)
    assert [type(b.mlp).__name__ for b in _ours(tmp_path).h] == ["MLP", "MoE", "MLP", "MoE",
                                                                "MLP"]


def test_aux_loss_equals_mixtral_router_loss(tmp_path):
    """One MoE layer (transformers pools the layers' router logits before its Switch loss; we
    average per-layer losses; with one layer the two are the same number), and the training
    loss is cross-entropy plus router_aux_loss_coef times it, as MixtralForCausalLM's."""
    config_cls, model_cls, extra = PEERS["mixtral"]
    torch.manual_seed(0)
    theirs = model_cls(config_cls(**{**SHAPE, **extra, "num_hidden_layers": 1,
                                     "router_aux_loss_coef": 0.1})).eval()
    theirs.save_pretrained(tmp_path)
    ours = _ours(tmp_path)
    assert ours.cfg.aux_loss_coef == pytest.approx(0.1)
    idx = torch.randint(0, SHAPE["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(2))
    (layer,) = moe_layers(ours)
    with torch.no_grad():
        out = theirs(idx, labels=idx, output_router_logits=True)
        _, loss = ours(idx[:, :-1], idx[:, 1:])  # transformers shifts the labels itself
        cross_entropy = loss - 0.1 * layer.aux_loss
        ours(idx)  # the aux loss of the whole sequence, as transformers routes it
    torch.testing.assert_close(layer.aux_loss, out.aux_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cross_entropy, out.loss - 0.1 * out.aux_loss, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("model_type,change,field", [
    ("mixtral", {"router_jitter_noise": 0.1}, "router_jitter_noise"),
    ("qwen2_moe", {"mlp_only_layers": [1]}, "mlp_only_layers"),
    ("qwen2_moe", {"shared_expert_intermediate_size": 40}, "shared_expert_intermediate_size"),
    ("mixtral", {"num_experts_per_tok": 5}, "model.moe_top_k"),
])
def test_unsupported_moe_switches_name_the_field(model_type, change, field, tmp_path):
    raw = {"model_type": model_type, **SHAPE, "intermediate_size": 48, "num_local_experts": 4,
           "num_experts": 4, "moe_intermediate_size": 16, **change}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError) as err:
        resolve_model_source(f"hf-config:{tmp_path / 'config.json'}")
    assert err.value.field.endswith(field)
