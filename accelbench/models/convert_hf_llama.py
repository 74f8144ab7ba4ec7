"""Our GPT from a Hugging Face Llama, Mistral or Qwen2 config and checkpoint.

The three share one layout (LlamaForCausalLM's): separate q, k, v projections that we fuse into
attn.c_attn's [q | k | v] rows, gate and up projections fused into mlp.c_fc's [gate | up] rows,
RMSNorm weights, and an untied (or tied) lm_head. Hugging Face already stores q and k in the
rotate-half order our Rotary uses, so no permutation is needed. Qwen2 differs only by q/k/v
biases; Mistral (v0.1) by its sliding-window attention, which is not modelled (our attention is
full causal: the two agree for sequences up to the window). transformers is not imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig, validate_model

LLAMA_TYPES = ("llama", "mistral", "qwen2")
_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
             "vocab_size")
_ROPE_TYPES = ("default", "llama3")
# Buffers that older transformers versions store; they carry no weights.
_IGNORED_SUFFIXES = (".rotary_emb.inv_freq",)
_LAYER_NAMES = {"input_layernorm": "ln_1", "post_attention_layernorm": "ln_2",
                "self_attn.o_proj": "attn.c_proj", "mlp.down_proj": "mlp.c_proj"}
_TOP_NAMES = {"model.embed_tokens.weight": "wte.weight", "model.norm.weight": "ln_f.weight",
              "lm_head.weight": "lm_head.weight"}
_FUSED = {"self_attn.q_proj": ("attn.c_attn", 0), "self_attn.k_proj": ("attn.c_attn", 1),
          "self_attn.v_proj": ("attn.c_attn", 2), "mlp.gate_proj": ("mlp.c_fc", 0),
          "mlp.up_proj": ("mlp.c_fc", 1)}


def _rope(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The rotary settings of transformers 5 (rope_parameters) or 4 (rope_theta, rope_scaling)."""
    rope = dict(raw.get("rope_scaling") or {})
    rope.update(raw.get("rope_parameters") or {})
    rope.setdefault("rope_theta", raw.get("rope_theta", 10000.0))
    rope["rope_type"] = rope.get("rope_type", rope.get("type", "default"))
    return rope


def _biases(raw: Mapping[str, Any], model_type: str, where: str) -> tuple[bool, bool]:
    """(bias, qkv_bias): Qwen2 has q/k/v biases only; Llama all or none (attention and MLP)."""
    if model_type == "qwen2":
        return False, True
    attention, mlp = bool(raw.get("attention_bias", False)), bool(raw.get("mlp_bias", False))
    if attention != mlp:
        raise ConfigError(f"{where}: attention_bias", f"attention_bias {attention} with mlp_bias "
                          f"{mlp} is not supported", "both false or both true")
    return attention, False


def _check_fields(raw: Mapping[str, Any], where: str) -> None:
    """Reject what our decoder cannot reproduce, naming the Hugging Face field."""
    missing = [f for f in _REQUIRED if raw.get(f) is None]
    if missing:
        raise ConfigError(where, f"missing {', '.join(missing)}", ", ".join(_REQUIRED))
    if raw.get("hidden_act", "silu") != "silu":
        raise ConfigError(f"{where}: hidden_act", f"{raw['hidden_act']!r} is not supported", "silu")
    head_dim, hidden, heads = raw.get("head_dim"), raw["hidden_size"], raw["num_attention_heads"]
    if head_dim is not None and head_dim * heads != hidden:
        raise ConfigError(f"{where}: head_dim", f"{head_dim} x {heads} heads is not hidden_size "
                          f"{hidden}", f"{hidden // heads} (hidden_size / num_attention_heads)")
    if raw.get("use_sliding_window"):
        raise ConfigError(f"{where}: use_sliding_window", "sliding-window attention is not "
                          "supported", "false")
    rope_type = _rope(raw)["rope_type"]
    if rope_type not in _ROPE_TYPES:
        raise ConfigError(f"{where}: rope_type", f"{rope_type!r} is not supported",
                          ", ".join(_ROPE_TYPES))


def _rope_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Our rotary fields for the config's base and (Llama 3.1) scaling."""
    rope = _rope(raw)
    fields: dict[str, Any] = {"rotary_base": float(rope["rope_theta"])}
    if rope["rope_type"] == "llama3":
        fields.update(rope_scaling="llama3", rope_factor=float(rope["factor"]),
                      rope_low_freq_factor=float(rope["low_freq_factor"]),
                      rope_high_freq_factor=float(rope["high_freq_factor"]),
                      rope_original_positions=int(rope["original_max_position_embeddings"]))
    return fields


def model_config_from_hf_llama(raw: Mapping[str, Any], name: str, where: str) -> ModelConfig:
    """Our ModelConfig for a Llama, Mistral or Qwen2 config.json (as a dict).

    Defaults follow LlamaConfig: num_key_value_heads = num_attention_heads, rms_norm_eps 1e-6,
    max_position_embeddings 2048, tie_word_embeddings false, rope_theta 10000.
    """
    model_type = raw.get("model_type", "llama")
    _check_fields(raw, where)
    bias, qkv_bias = _biases(raw, model_type, where)
    cfg = ModelConfig(
        name=name, n_layer=raw["num_hidden_layers"], n_head=raw["num_attention_heads"],
        d_model=raw["hidden_size"], vocab_size=raw["vocab_size"],
        n_positions=raw.get("max_position_embeddings") or 2048, d_ff=raw["intermediate_size"],
        position="rotary", tie_embeddings=bool(raw.get("tie_word_embeddings", False)),
        activation="swiglu", layer_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        norm="rmsnorm", bias=bias, qkv_bias=qkv_bias,
        n_kv_head=raw.get("num_key_value_heads") or 0, **_rope_fields(raw))
    return validate_model(cfg)


def _split_name(hf_name: str) -> tuple[str, str, str]:
    """(layer index, module path, leaf) of a model.layers.N.<module>.<leaf> tensor name."""
    parts = hf_name.removeprefix("model.layers.").split(".")
    return parts[0], ".".join(parts[1:-1]), parts[-1]


def llama_to_our_state_dict(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a Llama-layout state dict to ours, fusing q/k/v and gate/up into one matrix each."""
    ours: dict[str, torch.Tensor] = {}
    fused: dict[str, list[torch.Tensor | None]] = {}
    for hf_name, tensor in state_dict.items():
        if hf_name.endswith(_IGNORED_SUFFIXES):
            continue
        if hf_name in _TOP_NAMES:
            ours[_TOP_NAMES[hf_name]] = tensor
            continue
        if not hf_name.startswith("model.layers."):
            raise ConfigError("state_dict", f"unexpected tensor {hf_name!r}",
                              "the tensors of a LlamaForCausalLM checkpoint")
        layer, module, leaf = _split_name(hf_name)
        if module in _FUSED:
            target, slot = _FUSED[module]
            parts = fused.setdefault(f"h.{layer}.{target}.{leaf}", [None, None, None])
            parts[slot] = tensor
        elif module in _LAYER_NAMES:
            ours[f"h.{layer}.{_LAYER_NAMES[module]}.{leaf}"] = tensor
        else:
            raise ConfigError("state_dict", f"unexpected tensor {hf_name!r}",
                              "the tensors of a LlamaForCausalLM checkpoint")
    for name, parts in fused.items():
        present = [p for p in parts if p is not None]
        expected = 3 if ".attn." in name else 2
        if len(present) != expected:
            raise ConfigError("state_dict", f"{name} lacks one of its fused projections",
                              "q, k and v (or gate and up) of every layer")
        ours[name] = torch.cat(present, dim=0)
    return ours
