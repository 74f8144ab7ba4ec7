"""Our GPT from a Hugging Face GPT-2 config and checkpoint, so users benchmark their own model.

Our GPT at its default switches is GPT-2's architecture; the differences are naming and layout.
HF's GPT-2 uses Conv1D layers whose weight is (in_features, out_features), the transpose of
nn.Linear's, and prefixes GPT2LMHeadModel's tensors with "transformer.". The fused QKV layout
(q of all heads, then k, then v) is the same as ours. transformers is not imported here: a config
may be a GPT2Config, a dict, or a config.json file (or its directory).
Our GPT has no dropout; the checkpoint's *_pdrop settings are ignored (eval-mode numerics).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig, validate_model
from accelbench.models.gpt import GPT, pad_vocab_rows

# HF activation names -> ours: the first three are GELU's tanh approximation, "gelu" is exact erf.
HF_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                  "gelu_fast": "gelu_tanh", "gelu": "gelu"}
_REQUIRED = ("n_embd", "n_layer", "n_head", "vocab_size", "n_positions")
# Switches our model does not implement, with the value it does implement.
_UNSUPPORTED_SWITCHES = {"scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
                         "add_cross_attention": False, "scale_attn_weights": True}
_CONV1D_SUFFIXES = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                    "mlp.c_proj.weight")
# Causal-mask buffers that older transformers versions store in the state dict.
_IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")


def read_config_json(path: Path) -> dict[str, Any]:
    """config.json (or a directory holding one) as a dict; unreadable input is a ConfigError."""
    file = path / "config.json" if path.is_dir() else path
    try:
        return json.loads(file.read_text())
    except OSError as exc:
        raise ConfigError("model", f"cannot read config {file}: {exc}") from exc
    except ValueError as exc:
        raise ConfigError("model", f"{file} is not a JSON file: {exc}") from exc


def _config_dict(config: Any) -> tuple[dict[str, Any], str]:
    """The raw fields of a GPT2Config, dict or config.json path, and a label for messages."""
    if isinstance(config, Mapping):
        return dict(config), "hf-gpt2"
    if isinstance(config, str | Path):
        path = Path(config)
        raw = read_config_json(path)
        folder = path if path.is_dir() else path.parent
        return {**raw, "_name_or_path": raw.get("_name_or_path") or folder.name}, str(config)
    if hasattr(config, "to_dict"):
        return dict(config.to_dict()), "hf-gpt2"
    raise ConfigError("model", f"not a GPT-2 config: {type(config).__name__}",
                      "GPT2Config, dict, or path to config.json")


def _check_fields(raw: Mapping[str, Any], where: str) -> None:
    """Reject what our GPT cannot reproduce, naming the Hugging Face field."""
    if raw.get("model_type", "gpt2") != "gpt2":
        raise ConfigError(f"{where}: model_type", f"{raw['model_type']!r} is not GPT-2", "gpt2")
    missing = [f for f in _REQUIRED if raw.get(f) is None]
    if missing:
        raise ConfigError(where, f"missing {', '.join(missing)}", ", ".join(_REQUIRED))
    act = raw.get("activation_function", "gelu_new")
    if act not in HF_ACTIVATIONS:
        raise ConfigError(f"{where}: activation_function", f"{act!r} is not supported",
                          ", ".join(HF_ACTIVATIONS))
    for field, supported in _UNSUPPORTED_SWITCHES.items():
        if bool(raw.get(field, supported)) != supported:
            raise ConfigError(f"{where}: {field}", f"{raw[field]!r} is not supported",
                              str(supported).lower())


def model_config_from_hf_gpt2(config: Any, name: str | None = None) -> ModelConfig:
    """Our ModelConfig for a Hugging Face GPT-2 config (GPT2Config, dict, or config.json path).

    Defaults follow GPT2Config: n_inner None (4 x n_embd), activation gelu_new,
    layer_norm_epsilon 1e-5, tie_word_embeddings true.
    """
    raw, where = _config_dict(config)
    _check_fields(raw, where)
    cfg = ModelConfig(
        name=name or raw.get("_name_or_path") or "hf-gpt2",
        n_layer=raw["n_layer"],
        n_head=raw["n_head"],
        d_model=raw["n_embd"],
        vocab_size=raw["vocab_size"],
        n_positions=raw["n_positions"],
        d_ff=raw.get("n_inner") or 0,
        tie_embeddings=bool(raw.get("tie_word_embeddings", True)),
        activation=HF_ACTIVATIONS[raw.get("activation_function", "gelu_new")],
        layer_norm_eps=float(raw.get("layer_norm_epsilon", 1e-5)),
    )
    return validate_model(cfg)


def hf_gpt2_to_our_state_dict(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a GPT-2 state dict (GPT2LMHeadModel's or GPT2Model's) to ours; transpose Conv1D."""
    ours: dict[str, torch.Tensor] = {}
    for hf_name, tensor in state_dict.items():
        if hf_name.endswith(_IGNORED_SUFFIXES):
            continue
        name = hf_name.removeprefix("transformer.")
        if name.endswith(_CONV1D_SUFFIXES):
            tensor = tensor.t()
        ours[name] = tensor
    return ours


def check_state_dict_keys(model: GPT, ours: Mapping[str, torch.Tensor]) -> None:
    """Name the first missing, unexpected or wrongly shaped tensor before loading."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(ours))
    unexpected = sorted(set(ours) - set(expected))
    if missing or unexpected:
        raise ConfigError("state_dict", f"missing {missing[:4]}, unexpected {unexpected[:4]}",
                          "the tensors of a checkpoint matching its config")
    for key, tensor in ours.items():
        if tuple(tensor.shape) != tuple(expected[key].shape):
            raise ConfigError(f"state_dict: {key}", f"shape {tuple(tensor.shape)} does not match "
                              f"the config's {tuple(expected[key].shape)}")


def load_hf_gpt2_state_dict(model: GPT, state_dict: Mapping[str, torch.Tensor]) -> None:
    """Copy Hugging Face GPT-2 weights into `model` (every tensor of both sides must match)."""
    if model.cfg.position != "learned" or model.cfg.parallel_residual:
        raise ConfigError("model", "GPT-2 weights need learned positions and a serial residual")
    load_our_state_dict(model, hf_gpt2_to_our_state_dict(state_dict))


def load_our_state_dict(model: GPT, ours: dict[str, torch.Tensor]) -> None:
    """A converted state dict (our names) into `model`: a tied head must equal the token
    embedding, and every tensor of both sides must match."""
    if model.cfg.tie_embeddings:
        head = ours.get("lm_head.weight")
        if head is not None and not torch.equal(head, ours.get("wte.weight", head)):
            raise ConfigError("state_dict: lm_head.weight", "differs from wte.weight although "
                              "the config ties them", "tie_word_embeddings false")
        if "wte.weight" in ours:
            ours["lm_head.weight"] = ours["wte.weight"]
    pad_vocab_rows(ours, model.cfg)
    check_state_dict_keys(model, ours)
    model.load_state_dict(ours, strict=True)


def gpt_from_hf_gpt2(config: Any, state_dict: Mapping[str, torch.Tensor],
                     name: str | None = None) -> GPT:
    """Our GPT (fp32, on CPU) holding a Hugging Face GPT-2 checkpoint's weights."""
    model = GPT(model_config_from_hf_gpt2(config, name))
    load_hf_gpt2_state_dict(model, state_dict)
    return model


def _load_safetensors(files: list[Path]) -> dict[str, torch.Tensor]:
    """Tensors of one or more .safetensors files; the package is optional."""
    try:
        from safetensors.torch import load_file
    except ImportError:
        raise ConfigError("checkpoint", f"{files[0].name} needs the safetensors package",
                          "pip install 'accelbench[hf]' (or safetensors), "
                          "or a pytorch_model.bin") from None
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        tensors.update(load_file(str(file)))
    return tensors


def _sharded_files(index: Path) -> list[Path]:
    """The shard files named by a *.index.json weight map, in first-seen order."""
    weight_map = json.loads(index.read_text())["weight_map"]
    return [index.parent / f for f in dict.fromkeys(weight_map.values())]


def _load_torch_bins(files: list[Path]) -> dict[str, torch.Tensor]:
    """Tensors of one or more pytorch_model*.bin files (tensors only: weights_only loading)."""
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        tensors.update(torch.load(file, map_location="cpu", weights_only=True))
    return tensors


def load_checkpoint_dir(path: str | Path) -> dict[str, torch.Tensor]:
    """The state dict of a save_pretrained directory: safetensors first, then pytorch_model.bin."""
    folder = Path(path)
    if (folder / "model.safetensors").is_file():
        return _load_safetensors([folder / "model.safetensors"])
    if (folder / "model.safetensors.index.json").is_file():
        return _load_safetensors(_sharded_files(folder / "model.safetensors.index.json"))
    if (folder / "pytorch_model.bin").is_file():
        return _load_torch_bins([folder / "pytorch_model.bin"])
    if (folder / "pytorch_model.bin.index.json").is_file():
        return _load_torch_bins(_sharded_files(folder / "pytorch_model.bin.index.json"))
    raise ConfigError("checkpoint", f"no weights in {folder}",
                      "model.safetensors or pytorch_model.bin (optionally sharded with an index)")


def gpt_from_pretrained_dir(path: str | Path, name: str | None = None) -> GPT:
    """Our GPT from a local Hugging Face GPT-2 directory (config.json plus weights)."""
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise ConfigError("checkpoint", f"{folder} has no config.json",
                          "a directory written by save_pretrained")
    return gpt_from_hf_gpt2(folder / "config.json", load_checkpoint_dir(folder),
                            name or folder.name)
