"""GenSLM model presets and a reader for Hugging Face GPT-NeoX config files (GenSLM's format).

GenSLM's published models (ramanathanlab/genslm, genslm/architectures/neox/*.json) are GPT-NeoX:
rotary embedding on a quarter of each head (rotary_pct 0.25, base 10000), parallel attention and
MLP, untied input and output embeddings, gelu_fast (GELU's tanh approximation), vocab 69 (the
codon vocabulary). Every preset here is that architecture, except the two shapes of the
Argonne accelerator study (genslm-13b, genslm-1.5b): see `_study_gpt`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig, validate_model
from accelbench.config.preset_registry import register

GENSLM_VOCAB = 69  # codon_wordlevel_69vocab.json: 5 special tokens + 64 codons
GENSLM_ROTARY_PCT = 0.25
NEOX_ROTARY_BASE = 10000  # GPT-NeoX's default rotary base (rotary_emb_base / rope_theta)
GENSLM_ASSETS = Path(__file__).resolve().parents[1] / "assets" / "genslm"

# Hugging Face activation names -> ours. gelu_fast, gelu_new and gelu_pytorch_tanh are all
# 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); "gelu" is the exact erf form.
_NEOX_ACTIVATIONS = {"gelu_fast": "gelu_tanh", "gelu_new": "gelu_tanh",
                     "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}
_NEOX_REQUIRED = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                  "vocab_size")


def _neox(name: str, n_layer: int, n_head: int, d_model: int, d_ff: int,
          n_positions: int) -> ModelConfig:
    """GenSLM's GPT-NeoX architecture at one shape."""
    return ModelConfig(name, n_layer, n_head, d_model, GENSLM_VOCAB, n_positions, d_ff=d_ff,
                       position="rotary", rotary_pct=GENSLM_ROTARY_PCT, parallel_residual=True,
                       tie_embeddings=False, activation="gelu_tanh", layer_norm_eps=1e-5)


def _study_gpt(name: str, n_layer: int, n_head: int, d_model: int, vocab: int,
               n_positions: int) -> ModelConfig:
    """The study's GenSLM shapes, built as GPT-2/GPT-3 models (learned positions, tied head).

    Why not NeoX: the study names the 1.5B "GPT-3 XL" (the GPT-3 paper's 24-layer, 2048-wide
    shape, run on the CS-2, whose GPT-3 models use learned positions), both use vocabularies
    (70, 71) that no GenSLM NeoX file has, and the 13B shape
    cannot be GenSLM's NeoX: its heads are 4992/64 = 78 wide, and a quarter of 78 gives 19 rotary
    dimensions, an odd number that rotary embedding cannot pair.
    """
    return ModelConfig(name, n_layer, n_head, d_model, vocab, n_positions)


GENSLM_PRESETS: tuple[ModelConfig, ...] = (
    _neox("genslm-25m", 8, 8, 512, 2048, 2048),
    _neox("genslm-25m-10k", 8, 8, 512, 2048, 10240),
    _neox("genslm-250m", 12, 16, 1840, 2048, 2048),
    _neox("genslm-250m-10k", 12, 16, 1840, 2048, 10240),
    _neox("genslm-2.5b", 28, 32, 3840, 4096, 2048),
    _neox("genslm-2.5b-10k", 28, 32, 3840, 4096, 10240),
    # GenSLM's published 25B file says hidden_size 8196, which 64 heads do not divide
    # (8196 / 64 = 128.06): a typo for 8192 = 64 x 128, which is what we build.
    _neox("genslm-25b", 64, 64, 8192, 8000, 2048),
    _neox("genslm-25b-10k", 64, 64, 8192, 8000, 10240),
    # The study's own variants (Emani et al. 2023): SN30's 13B (4992 / 64 = 78 per head) and
    # CS-2's GPT-3 XL shape at sequence 10240.
    _study_gpt("genslm-13b", 44, 64, 4992, 71, 1024),
    _study_gpt("genslm-1.5b", 24, 16, 2048, 70, 10240),
)

for _cfg in GENSLM_PRESETS:
    register(_cfg)


def neox_config_files() -> list[Path]:
    """The shipped GPT-NeoX config files reconstructed from GenSLM's published table."""
    return sorted(GENSLM_ASSETS.glob("neox_*.json"))


def _read_json(path: Path) -> dict[str, Any]:
    """Parse a config file; bare Python True/False/None (GenSLM's 25B file has one) are accepted."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError("model", f"cannot read NeoX config {path}: {exc}") from exc
    try:
        return json.loads(text)
    except ValueError:
        literals = {"True": "true", "False": "false", "None": "null"}
        fixed = re.sub(r'"(?:\\.|[^"\\])*"|\b(?:True|False|None)\b',
                       lambda m: literals.get(m.group(0), m.group(0)), text)
        try:
            return json.loads(fixed)
        except ValueError as exc:
            raise ConfigError("model", f"{path} is not a JSON file: {exc}") from exc


def _rotary_settings(raw: Mapping[str, Any], where: str) -> tuple[float, float]:
    """(rotary_pct, base) from the old fields or transformers 5's rope_parameters."""
    if raw.get("rope_scaling"):
        raise ConfigError(f"{where}: rope_scaling", "scaled rotary embedding is not supported",
                          "null")
    rope = raw.get("rope_parameters") or {}
    pct = raw.get("rotary_pct", rope.get("partial_rotary_factor", GENSLM_ROTARY_PCT))
    base = raw.get("rotary_emb_base", rope.get("rope_theta", NEOX_ROTARY_BASE))
    if rope.get("rope_type", "default") != "default":
        raise ConfigError(f"{where}: rope_type", f"{rope['rope_type']!r} is not supported",
                          "default")
    return float(pct), float(base)


def _check_neox_fields(raw: Mapping[str, Any], where: str) -> None:
    """Reject what our model cannot build, naming the NeoX field (before any ModelConfig)."""
    if raw.get("model_type", "gpt_neox") != "gpt_neox":
        raise ConfigError(f"{where}: model_type", f"{raw['model_type']!r} is not GPT-NeoX",
                          "gpt_neox")
    missing = [f for f in _NEOX_REQUIRED if f not in raw]
    if missing:
        raise ConfigError(where, f"missing {', '.join(missing)}", ", ".join(_NEOX_REQUIRED))
    hidden, heads = raw["hidden_size"], raw["num_attention_heads"]
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden % heads:
        raise ConfigError(
            f"{where}: hidden_size",
            f"{heads} attention heads do not divide hidden_size {hidden} "
            f"({hidden} / {heads} = {hidden / heads:.2f}); GenSLM's published 25B file has this "
            "typo, use the genslm-25b preset (hidden 8192)",
            f"a multiple of {heads}",
        )
    if raw.get("hidden_act", "gelu") not in _NEOX_ACTIVATIONS:
        raise ConfigError(f"{where}: hidden_act", f"unknown {raw['hidden_act']!r}",
                          ", ".join(_NEOX_ACTIVATIONS))
    if not raw.get("attention_bias", True):
        raise ConfigError(f"{where}: attention_bias", "false is not supported", "true")


def model_from_neox_config(
    path_or_dict: str | Path | Mapping[str, Any], name: str | None = None
) -> ModelConfig:
    """Build our ModelConfig from a Hugging Face GPTNeoXConfig (a JSON file or its dict).

    Defaults follow GPTNeoXConfig: max_position_embeddings 2048, rotary_pct 0.25,
    use_parallel_residual true, tie_word_embeddings false, hidden_act gelu, layer_norm_eps 1e-5.
    """
    if isinstance(path_or_dict, Mapping):
        raw, where = dict(path_or_dict), name or "neox-config"
    else:
        path = Path(path_or_dict)
        raw, where = _read_json(path), str(path)
        name = name or path.stem
    _check_neox_fields(raw, where)
    rotary_pct, rotary_base = _rotary_settings(raw, where)
    cfg = ModelConfig(
        name=name or "neox-config",
        n_layer=raw["num_hidden_layers"],
        n_head=raw["num_attention_heads"],
        d_model=raw["hidden_size"],
        vocab_size=raw["vocab_size"],
        n_positions=raw.get("max_position_embeddings", 2048),
        d_ff=raw["intermediate_size"],
        position="rotary",
        rotary_pct=rotary_pct,
        rotary_base=rotary_base,
        parallel_residual=bool(raw.get("use_parallel_residual", True)),
        tie_embeddings=bool(raw.get("tie_word_embeddings", False)),
        activation=_NEOX_ACTIVATIONS[raw.get("hidden_act", "gelu")],
        layer_norm_eps=float(raw.get("layer_norm_eps", 1e-5)),
    )
    return validate_model(cfg)
