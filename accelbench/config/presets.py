"""Named model presets (GPT-2 here; GPT-3, Llama and GenSLM in their own modules, imported here so
that every family is registered), and `resolve_model` for preset[:overrides] and custom shapes."""

from __future__ import annotations

from accelbench.config import presets_genslm as _genslm  # noqa: F401  (registers the GenSLM presets)
from accelbench.config import presets_gpt3 as _gpt3  # noqa: F401  (registers the GPT-3 presets)
from accelbench.config import presets_llama as _llama  # noqa: F401  (registers the Llama family)
from accelbench.config import presets_moe as _moe  # noqa: F401  (registers the MoE presets)
from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig, moe_layer_count
from accelbench.config.preset_registry import GPT2_VOCAB, get_preset, preset_names, register

__all__ = ["GPT2_VOCAB", "get_preset", "preset_names", "register", "resolve_model"]


def _gpt2(name: str, n_layer: int, n_head: int, d_model: int) -> ModelConfig:
    """GPT-2 shape: learned positions, tied embeddings, 1024 positions (OpenAI's release)."""
    return ModelConfig(name, n_layer, n_head, d_model, GPT2_VOCAB, 1024)


for _cfg in (
    _gpt2("gpt2", 12, 12, 768),
    _gpt2("gpt2-medium", 24, 16, 1024),
    _gpt2("gpt2-large", 36, 20, 1280),
    _gpt2("gpt2-xl", 48, 25, 1600),
    # A few-million-parameter model of the same family, for tests and the CPU default run.
    ModelConfig("gpt2-tiny", 2, 4, 128, GPT2_VOCAB, 256),
):
    register(_cfg)


_INT_FIELDS = ("n_layer", "n_head", "n_kv_head", "d_model", "vocab_size", "n_positions", "d_ff",
               "n_experts", "moe_top_k", "n_shared_experts", "moe_ffn_dim", "moe_every",
               "moe_first_dense")
_FLOAT_FIELDS = ("capacity_factor", "aux_loss_coef")
_TEXT_FIELDS = ("moe_gate",)
_ALIASES = {"layers": "n_layer", "heads": "n_head", "kv_heads": "n_kv_head", "hidden": "d_model",
            "vocab": "vocab_size", "positions": "n_positions", "ffn": "d_ff",
            "experts": "n_experts", "top_k": "moe_top_k"}
_FIELDS = _INT_FIELDS + _FLOAT_FIELDS + _TEXT_FIELDS
# The overrides that shape a mixture of experts; each needs a model with experts.
_MOE_FIELDS = ("n_experts", "moe_top_k", "n_shared_experts", "moe_ffn_dim", "moe_every",
               "moe_first_dense", "capacity_factor", "aux_loss_coef", "moe_gate")


def _override_value(key: str, value: str) -> object:
    """An override's value as its field's type, or a ConfigError naming the field."""
    if key in _TEXT_FIELDS:
        return value.strip()
    kind, word = (int, "an integer") if key in _INT_FIELDS else (float, "a number")
    try:
        return kind(value)
    except ValueError:
        raise ConfigError(f"model.{key}", f"must be {word}, got {value!r}") from None


def resolve_model(spec: str) -> ModelConfig:
    """Turn 'gpt2-xl', 'gpt2-xl:n_layer=1', 'moe-tiny:experts=4,capacity_factor=1.25' or
    'custom:layers=4,heads=4,hidden=256' into a config."""
    name, _, overrides = spec.partition(":")
    if name == "custom":
        base = ModelConfig("custom", 1, 1, 1, GPT2_VOCAB, 1024)
    else:
        base = get_preset(name)
    changes: dict[str, object] = {}
    for item in filter(None, overrides.split(",")):
        key, eq, value = item.partition("=")
        key = _ALIASES.get(key.strip(), key.strip())
        if not eq or key not in _FIELDS:
            allowed = ", ".join(list(_FIELDS) + list(_ALIASES))
            raise ConfigError("model", f"bad override {item!r} in {spec!r}", allowed)
        changes[key] = _override_value(key, value)
    if name == "custom" and not {"n_layer", "n_head", "d_model"} <= changes.keys():
        raise ConfigError("model", "custom needs layers, heads and hidden",
                          "custom:layers=L,heads=H,hidden=D")
    _check_counts(changes)
    label = spec if changes else base.name
    cfg = base.with_changes(name=label, **changes) if changes else base
    _check_moe(base, cfg, changes)
    return cfg


def _check_counts(changes: dict[str, object]) -> None:
    """Overrides whose 0 would mean something else in the config: kv_heads=0 (all heads) and
    experts=0 (a dense model, silently) are refused; a dense model is a dense preset."""
    if "n_kv_head" in changes and not changes["n_kv_head"] >= 1:  # type: ignore[operator]
        raise ConfigError("model.n_kv_head", f"kv_heads must be at least 1, got "
                          f"{changes['n_kv_head']}", "1 or more, dividing the heads")
    if "n_experts" in changes and not changes["n_experts"] >= 1:  # type: ignore[operator]
        raise ConfigError("model.n_experts", f"experts must be at least 1, got "
                          f"{changes['n_experts']} (0 would train a dense model)",
                          "1 or more; a dense model: a dense preset")


def _check_moe(base: ModelConfig, cfg: ModelConfig, changes: dict[str, object]) -> None:
    """MoE overrides must leave a mixture of experts: none on a dense model, and the layers
    left after moe_first_dense / moe_every must hold at least one MoE layer."""
    given = [key for key in _MOE_FIELDS if key in changes]
    if not cfg.n_experts:
        if given:
            raise ConfigError(f"model.{given[0]}", f"{given[0]} given to {base.name}, a dense "
                              "model (no experts)", "with experts=N, or a preset with experts")
        return
    if moe_layer_count(cfg) == 0:
        key = "moe_first_dense" if cfg.moe_first_dense >= cfg.n_layer else "moe_every"
        raise ConfigError(f"model.{key}", f"no mixture-of-experts layer is left among "
                          f"{cfg.n_layer} layers (moe_first_dense={cfg.moe_first_dense}, "
                          f"moe_every={cfg.moe_every})",
                          "moe_first_dense < layers, and a multiple of moe_every from "
                          "moe_first_dense + 1 to layers")
