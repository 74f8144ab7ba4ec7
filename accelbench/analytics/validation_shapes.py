"""The real shapes of the published runs the planner is checked against; no torch."""

from __future__ import annotations

from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig, validate_model
from accelbench.config.presets import get_preset, resolve_model

MEGATRON_VOCAB = 51200  # GPT-2 BPE padded to a multiple of 8 x 128 (Megatron-LM)


def validated_shape(name: str, layers: int, heads: int, hidden: int, vocab: int,
                    positions: int, d_ff: int = 0, llama: bool = False, kv: int = 0
                    ) -> ModelConfig:
    """A validated shape; llama=True: Llama-style (RMSNorm, SwiGLU of width d_ff, rotary,
    untied head, no biases, kv key/value heads)."""
    extra = ({"position": "rotary", "tie_embeddings": False, "norm": "rmsnorm", "bias": False,
              "activation": "swiglu", "n_kv_head": kv} if llama else {})
    return validate_model(ModelConfig(name, layers, heads, hidden, vocab, positions, d_ff,
                                      **extra))


SHAPES: dict[str, ModelConfig] = {c.name: c for c in (
    validated_shape("gpt3-175b", 96, 96, 12288, MEGATRON_VOCAB, 2048),
    validated_shape("megatron-530b", 105, 128, 20480, MEGATRON_VOCAB, 2048),
    validated_shape("megatron-1t", 128, 160, 25600, MEGATRON_VOCAB, 2048),
    # PaLM 540B stand-in: L=118, 48 heads of 256 (attention width 12288, not d_model 18432),
    # N = 540.35e9, vocab 256k, shared embedding. d_model = the attention width and d_ff =
    # 160668 give 6N within 0.001% and 12*L*H*Q*T exactly; memory and traffic are rough.
    validated_shape("palm-540b", 118, 48, 12288, 256000, 2048, d_ff=160668),
    get_preset("llama3-8b"), get_preset("llama3-70b"),
)}


def shape(name: str) -> ModelConfig:
    """A validation shape by name (KeyError if absent)."""
    return SHAPES[name]


def resolve_shape(name: str) -> ModelConfig:
    """A model by preset name (accelbench.config.presets) or else by validation shape name."""
    try:
        return resolve_model(name)
    except ConfigError:
        if name in SHAPES:
            return SHAPES[name]
        raise
