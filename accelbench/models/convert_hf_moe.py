"""Our GPT from a Hugging Face Mixtral or Qwen-MoE (qwen2_moe) config and checkpoint.

Both are the Llama layout (convert_hf_llama) with a mixture-of-experts MLP. Mixtral: every
layer's block_sparse_moe holds a router (gate, E x d_model) and E experts w1 (gate), w3 (up),
w2 (down); softmax, top-k, the k gates renormalised. Qwen-MoE: q/k/v biases (Qwen2), mlp.gate
the router, mlp.experts.N.{gate,up,down}_proj, a shared expert (shared_expert_intermediate_size
wide, counted here as that width over moe_intermediate_size shared experts) whose output is
scaled by sigmoid(shared_expert_gate(x)), norm_topk_prob for the renormalisation, and dense MLPs
on the layers decoder_sparse_step and mlp_only_layers leave out (only a first-k run of them).
Checkpoints are read in the per-expert layout save_pretrained writes, or transformers 5's
stacked gate_up_proj / down_proj. transformers is not imported here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch

from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig
from accelbench.models.convert_hf_llama import llama_to_our_state_dict, model_config_from_hf_llama

MOE_TYPES = ("mixtral", "qwen2_moe")
_EXPERT = re.compile(r"model\.layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\."
                     r"(w1|w2|w3|gate_proj|up_proj|down_proj)\.weight")
_ROLE = {"w1": 0, "gate_proj": 0, "w3": 1, "up_proj": 1, "w2": 2, "down_proj": 2}
_RENAMED = {"block_sparse_moe.gate.weight": "mlp.router.weight",
            "mlp.gate.weight": "mlp.router.weight",
            "mlp.shared_expert_gate.weight": "mlp.shared_gate.weight",
            "mlp.experts.gate_up_proj": "mlp.experts.w_fc",
            "mlp.experts.down_proj": "mlp.experts.w_proj",
            "mlp.shared_expert.down_proj.weight": "mlp.shared.c_proj.weight"}
_SHARED_FUSED = {"mlp.shared_expert.gate_proj.weight": 0, "mlp.shared_expert.up_proj.weight": 1}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")


def model_config_from_hf_moe(raw: Mapping[str, Any], name: str, where: str) -> ModelConfig:
    """Our ModelConfig for a Mixtral or Qwen-MoE config.json (as a dict)."""
    if float(raw.get("router_jitter_noise") or 0.0) != 0.0:
        raise ConfigError(f"{where}: router_jitter_noise", "router jitter is not supported", "0")
    base = model_config_from_hf_llama(raw, name, where)
    if raw.get("model_type") == "mixtral":
        return base.with_changes(
            n_experts=raw.get("num_local_experts", 8), moe_top_k=raw.get("num_experts_per_tok", 2),
            aux_loss_coef=float(raw.get("router_aux_loss_coef", 0.0)))
    qkv_bias = bool(raw.get("qkv_bias", True))
    return base.with_changes(qkv_bias=qkv_bias, **_qwen_moe_fields(raw, where))


def _qwen_moe_fields(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Qwen-MoE's experts, shared expert, renormalisation and which layers are MoE."""
    expert = raw.get("moe_intermediate_size", 1408)
    shared = raw.get("shared_expert_intermediate_size", 5632)
    if shared % expert:
        raise ConfigError(f"{where}: shared_expert_intermediate_size", f"{shared} is not a "
                          f"multiple of moe_intermediate_size {expert}", f"a multiple of {expert}")
    dense = sorted(raw.get("mlp_only_layers") or [])
    if dense != list(range(len(dense))):
        raise ConfigError(f"{where}: mlp_only_layers", f"{dense} is not the first layers",
                          "[] or [0, 1, ..., k-1]")
    return dict(n_experts=raw.get("num_experts", 60), moe_top_k=raw.get("num_experts_per_tok", 4),
                moe_norm_topk=bool(raw.get("norm_topk_prob", False)), moe_ffn_dim=expert,
                n_shared_experts=shared // expert, moe_shared_gate=shared > 0,
                moe_every=raw.get("decoder_sparse_step", 1), moe_first_dense=len(dense),
                aux_loss_coef=float(raw.get("router_aux_loss_coef", 0.0)))


def moe_to_our_state_dict(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a Mixtral or Qwen-MoE state dict to ours: experts stacked into w_fc ([gate | up]
    rows) and w_proj, the shared expert's gate and up fused; the rest as a Llama's."""
    ours: dict[str, torch.Tensor] = {}
    experts: dict[str, dict[int, list[torch.Tensor | None]]] = {}
    shared: dict[str, list[torch.Tensor | None]] = {}
    rest: dict[str, torch.Tensor] = {}
    for hf_name, tensor in state_dict.items():
        match = _EXPERT.fullmatch(hf_name)
        if match:
            layer, index, role = match.groups()
            slots = experts.setdefault(layer, {}).setdefault(int(index), [None, None, None])
            slots[_ROLE[role]] = tensor
            continue
        layer_match = _LAYER.fullmatch(hf_name)
        inner = layer_match.group(2) if layer_match else ""
        if inner in _RENAMED:
            ours[f"h.{layer_match.group(1)}.{_RENAMED[inner]}"] = tensor
        elif inner in _SHARED_FUSED:
            parts = shared.setdefault(layer_match.group(1), [None, None])
            parts[_SHARED_FUSED[inner]] = tensor
        else:
            rest[hf_name] = tensor
    ours.update(_stacked_experts(experts))
    for layer, (gate, up) in shared.items():
        if gate is None or up is None:
            raise ConfigError("state_dict", f"layer {layer}'s shared expert lacks gate or up",
                              "gate_proj and up_proj of every shared expert")
        ours[f"h.{layer}.mlp.shared.c_fc.weight"] = torch.cat((gate, up), dim=0)
    ours.update(llama_to_our_state_dict(rest))
    return ours


def _stacked_experts(experts: dict[str, dict[int, list[torch.Tensor | None]]]
                     ) -> dict[str, torch.Tensor]:
    """Per-expert gate, up and down matrices of each layer as our stacked w_fc and w_proj."""
    ours: dict[str, torch.Tensor] = {}
    for layer, by_index in experts.items():
        if sorted(by_index) != list(range(len(by_index))):
            raise ConfigError("state_dict", f"layer {layer}'s experts are not numbered 0..E-1",
                              "every expert of every MoE layer")
        rows = [by_index[i] for i in range(len(by_index))]
        if any(t is None for slots in rows for t in slots):
            raise ConfigError("state_dict", f"layer {layer} has an expert without its gate, up "
                              "or down matrix", "w1, w2 and w3 (gate, up and down) of every expert")
        ours[f"h.{layer}.mlp.experts.w_fc"] = torch.stack([torch.cat((g, u)) for g, u, _ in rows])
        ours[f"h.{layer}.mlp.experts.w_proj"] = torch.stack([d for _, _, d in rows])
    return ours
