"""What to run: frozen dataclasses, presets and validation with clear errors."""

from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig, validate_model
from accelbench.config.presets import get_preset, preset_names, register

__all__ = ["ConfigError", "ModelConfig", "validate_model", "get_preset", "preset_names", "register"]
