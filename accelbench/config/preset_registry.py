"""The registry of named model presets; every family registers its presets here, validated, so
a typo cannot ship (presets.py imports every family, so looking a name up finds them all)."""

from __future__ import annotations

from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig, validate_model

GPT2_VOCAB = 50257  # GPT-2's BPE vocabulary, also GPT-3's

_PRESETS: dict[str, ModelConfig] = {}


def register(cfg: ModelConfig) -> ModelConfig:
    """Add a preset (validated); each model family registers its own the same way."""
    _PRESETS[cfg.name] = validate_model(cfg)
    return cfg


def preset_names() -> list[str]:
    """All preset names, sorted."""
    return sorted(_PRESETS)


def get_preset(name: str) -> ModelConfig:
    """Look up a preset or raise a ConfigError that lists the known names."""
    try:
        return _PRESETS[name]
    except KeyError:
        raise ConfigError("model", f"unknown preset {name!r}", ", ".join(preset_names())) from None
