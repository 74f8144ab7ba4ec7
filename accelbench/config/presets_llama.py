"""Llama-family presets: Llama 2 (7B, 13B, 70B), Llama 3 (8B, 70B), Llama 3.1 405B, Mistral 7B
(v0.1), and a tiny grouped-query Llama for tests and CPU runs.

Shapes are those of the released Hugging Face config.json files: RMSNorm (eps 1e-5), SwiGLU MLP,
rotary over the whole head (base 10000 for Llama 2 and Mistral, 500000 for Llama 3), untied
output head, no biases. The MLP width follows Meta's rounding rule (llama/model.py:
FeedForward), `llama_ffn_dim`, which gives every released width; Mistral publishes its width
(14336) without a rule. Parameter counts match the published ones exactly
(tests/unit/test_llama_presets.py). Mistral's sliding-window attention (4096) is not modelled:
the two agree for sequences up to the window.
"""

from __future__ import annotations

from accelbench.config.model import ModelConfig
from accelbench.config.preset_registry import register

LLAMA2_VOCAB = 32000  # Llama 2 and Mistral v0.1: SentencePiece, 32000 tokens
LLAMA3_VOCAB = 128256  # Llama 3: tiktoken-based, 128000 tokens + 256 special
LLAMA2_BASE, LLAMA3_BASE = 10000.0, 500000.0


def llama_ffn_dim(d_model: int, multiple_of: int, multiplier: float = 1.0) -> int:
    """Meta's SwiGLU width: 2/3 of 4 x d_model (the gated MLP's three matrices cost what GELU's
    two did), times the multiplier, rounded up to a multiple of multiple_of."""
    hidden = int(multiplier * int(2 * 4 * d_model / 3))
    return multiple_of * -(-hidden // multiple_of)


def llama(name: str, n_layer: int, n_head: int, d_model: int, n_kv_head: int, d_ff: int,
          vocab: int, positions: int, base: float, **extra: object) -> ModelConfig:
    """One Llama-style shape: RMSNorm, SwiGLU, grouped-query rotary attention, no biases."""
    return ModelConfig(name, n_layer, n_head, d_model, vocab, positions, d_ff=d_ff,
                       position="rotary", tie_embeddings=False, activation="swiglu",
                       norm="rmsnorm", bias=False, n_kv_head=n_kv_head, rotary_base=base,
                       **extra)  # type: ignore[arg-type]


LLAMA_PRESETS: tuple[ModelConfig, ...] = (
    llama("llama2-7b", 32, 32, 4096, 32, llama_ffn_dim(4096, 256), LLAMA2_VOCAB, 4096,
          LLAMA2_BASE),
    llama("llama2-13b", 40, 40, 5120, 40, llama_ffn_dim(5120, 256), LLAMA2_VOCAB, 4096,
          LLAMA2_BASE),
    llama("llama2-70b", 80, 64, 8192, 8, llama_ffn_dim(8192, 4096, 1.3), LLAMA2_VOCAB, 4096,
          LLAMA2_BASE),
    llama("llama3-8b", 32, 32, 4096, 8, llama_ffn_dim(4096, 1024, 1.3), LLAMA3_VOCAB, 8192,
          LLAMA3_BASE),
    llama("llama3-70b", 80, 64, 8192, 8, llama_ffn_dim(8192, 4096, 1.3), LLAMA3_VOCAB, 8192,
          LLAMA3_BASE),
    llama("llama3.1-405b", 126, 128, 16384, 8, llama_ffn_dim(16384, 4096, 1.2), LLAMA3_VOCAB,
          131072, LLAMA3_BASE, rope_scaling="llama3", rope_factor=8.0,
          rope_low_freq_factor=1.0, rope_high_freq_factor=4.0, rope_original_positions=8192),
    llama("mistral-7b", 32, 32, 4096, 8, 14336, LLAMA2_VOCAB, 32768, LLAMA2_BASE),
    # A few million parameters with grouped-query attention (4 query heads share 2 key/value
    # heads), for tests and the CPU benchmark.
    llama("llama-tiny", 2, 4, 128, 2, llama_ffn_dim(128, 64), LLAMA2_VOCAB, 256, LLAMA2_BASE),
)

for _cfg in LLAMA_PRESETS:
    register(_cfg)
