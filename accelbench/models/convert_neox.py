"""Load Hugging Face GPT-NeoX weights (GPTNeoXForCausalLM, GenSLM's checkpoints) into our GPT.

The one real difference is the fused QKV projection: NeoX's `query_key_value` output is laid out
per head as [head, (q, k, v), head_dim], ours as [(q, k, v), head, head_dim] (q of all heads, then
k, then v). Everything else is a renaming.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from accelbench.models.gpt import GPT, pad_vocab_rows

# Buffers that some transformers versions store in the state dict; they carry no weights.
_IGNORED_SUFFIXES = (".attention.bias", ".attention.masked_bias", ".rotary_emb.inv_freq")
_LAYER_NAMES = {
    "input_layernorm": "ln_1",
    "post_attention_layernorm": "ln_2",
    "attention.dense": "attn.c_proj",
    "mlp.dense_h_to_4h": "mlp.c_fc",
    "mlp.dense_4h_to_h": "mlp.c_proj",
}
_TOP_NAMES = {"embed_in.weight": "wte.weight", "final_layer_norm.weight": "ln_f.weight",
              "final_layer_norm.bias": "ln_f.bias", "embed_out.weight": "lm_head.weight",
              "lm_head.weight": "lm_head.weight"}  # embed_out before transformers 5


def neox_qkv_to_ours(tensor: torch.Tensor, n_head: int) -> torch.Tensor:
    """Reorder a fused QKV weight (3d, d) or bias (3d,) from NeoX's per-head layout to ours."""
    rest = tensor.shape[1:]
    head_dim = tensor.shape[0] // (3 * n_head)
    per_head = tensor.reshape(n_head, 3, head_dim, *rest)
    return per_head.transpose(0, 1).reshape(3 * n_head * head_dim, *rest)


def _our_name(hf_name: str) -> str | None:
    """Our parameter name for a NeoX one (None for the QKV tensors, handled apart)."""
    name = hf_name.removeprefix("gpt_neox.")
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "layers":
        module, _, leaf = parts[2].rpartition(".")
        if module == "attention.query_key_value":
            return None
        if module in _LAYER_NAMES:
            return f"h.{parts[1]}.{_LAYER_NAMES[module]}.{leaf}"
    raise KeyError(f"unexpected GPT-NeoX tensor {hf_name!r}")


def neox_to_our_state_dict(
    hf_state_dict: Mapping[str, torch.Tensor], n_head: int
) -> dict[str, torch.Tensor]:
    """Rename (and for QKV, reorder) a GPT-NeoX state dict into our GPT's names."""
    ours: dict[str, torch.Tensor] = {}
    for hf_name, tensor in hf_state_dict.items():
        if hf_name.endswith(_IGNORED_SUFFIXES):
            continue
        name = _our_name(hf_name)
        if name is None:
            layer, leaf = hf_name.removeprefix("gpt_neox.").split(".")[1], hf_name.split(".")[-1]
            ours[f"h.{layer}.attn.c_attn.{leaf}"] = neox_qkv_to_ours(tensor, n_head)
        else:
            ours[name] = tensor
    return ours


def load_neox_state_dict(model: GPT, hf_state_dict: Mapping[str, torch.Tensor]) -> None:
    """Copy GPT-NeoX weights into `model` (strict: every tensor of both sides must match)."""
    cfg = model.cfg
    if cfg.position != "rotary":
        raise ValueError("GPT-NeoX weights need a model with position='rotary'")
    ours = neox_to_our_state_dict(hf_state_dict, cfg.n_head)
    if cfg.tie_embeddings:
        head = ours.get("lm_head.weight")
        if head is not None and not torch.equal(head, ours["wte.weight"]):
            raise ValueError("model ties embeddings but the checkpoint's embed_out differs")
        ours["lm_head.weight"] = ours["wte.weight"]
    pad_vocab_rows(ours, cfg)
    model.load_state_dict(ours, strict=True)
