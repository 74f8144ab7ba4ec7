"""Hugging Face configs and checkpoints by their model_type: one entry point for `--model hf:DIR`
(shape and weights) and `--model hf-config:FILE` (the shape alone, random weights).

gpt2 -> convert_hf_gpt2; gpt_neox -> config/presets_genslm.py and convert_neox; llama, mistral,
qwen2 -> convert_hf_llama; mixtral, qwen2_moe -> convert_hf_moe. Anything else is one
ConfigError naming the supported types.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig
from accelbench.config.presets_genslm import model_from_neox_config
from accelbench.models.convert_hf_gpt2 import (
    load_checkpoint_dir,
    load_hf_gpt2_state_dict,
    load_our_state_dict,
    model_config_from_hf_gpt2,
    read_config_json,
)
from accelbench.models.convert_hf_llama import (
    LLAMA_TYPES,
    llama_to_our_state_dict,
    model_config_from_hf_llama,
)
from accelbench.models.convert_hf_moe import (
    MOE_TYPES,
    model_config_from_hf_moe,
    moe_to_our_state_dict,
)
from accelbench.models.convert_neox import load_neox_state_dict
from accelbench.models.gpt import GPT

SUPPORTED_MODEL_TYPES = ("gpt2", "gpt_neox", *LLAMA_TYPES, *MOE_TYPES)


def model_type_of(raw: Mapping[str, Any], where: str) -> str:
    """The config's model_type, refused in one line unless we build it (missing: GPT-2's files
    from before the field, as convert_hf_gpt2 has always read them)."""
    model_type = raw.get("model_type", "gpt2")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ConfigError(f"{where}: model_type", f"{model_type!r} is not supported",
                          ", ".join(SUPPORTED_MODEL_TYPES))
    return model_type


def model_config_from_hf(path: str | Path, name: str | None = None) -> ModelConfig:
    """Our ModelConfig for a config.json (or a save_pretrained folder holding one)."""
    file = Path(path).expanduser()
    raw = read_config_json(file)
    where = str(path)
    model_type = model_type_of(raw, where)
    if model_type == "gpt2":
        return model_config_from_hf_gpt2(file, name)
    label = name or raw.get("_name_or_path") or (file if file.is_dir() else file.parent).name
    if model_type == "gpt_neox":
        return model_from_neox_config(raw, label)
    if model_type in MOE_TYPES:
        return model_config_from_hf_moe(raw, label, where)
    return model_config_from_hf_llama(raw, label, where)


def load_llama_state_dict(model: GPT, state_dict: Mapping[str, torch.Tensor],
                          moe: bool = False) -> None:
    """Copy Llama, Mistral or Qwen2 (moe: Mixtral or Qwen-MoE) weights into `model` (every
    tensor of both sides must match)."""
    ours = moe_to_our_state_dict(state_dict) if moe else llama_to_our_state_dict(state_dict)
    load_our_state_dict(model, ours)


def load_pretrained_weights(model: GPT, folder: str | Path) -> None:
    """The weights of a save_pretrained folder into `model`, by its config's model_type."""
    folder = Path(folder).expanduser()
    model_type = model_type_of(read_config_json(folder), str(folder))
    state_dict = load_checkpoint_dir(folder)
    if model_type == "gpt2":
        load_hf_gpt2_state_dict(model, state_dict)
    elif model_type == "gpt_neox":
        load_neox_state_dict(model, state_dict)
    else:
        load_llama_state_dict(model, state_dict, moe=model_type in MOE_TYPES)


def gpt_from_hf_dir(folder: str | Path, name: str | None = None) -> GPT:
    """Our GPT (fp32, on CPU) holding a save_pretrained folder's weights, any supported type."""
    folder = Path(folder).expanduser()
    if not (folder / "config.json").is_file():
        raise ConfigError("checkpoint", f"{folder} has no config.json",
                          "a directory written by save_pretrained")
    model = GPT(model_config_from_hf(folder, name))
    load_pretrained_weights(model, folder)
    return model
