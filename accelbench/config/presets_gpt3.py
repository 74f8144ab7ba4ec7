"""GPT-3 family presets (Brown et al. 2020, table 2.1) and the study's GPT-3 30B.

All are GPT-2's architecture at GPT-3's shapes: learned positions (2048), tied embeddings, the
GPT-2 BPE vocabulary (50257), d_ff = 4 x d_model, pre-LayerNorm, GELU (tanh form). The GPT-3
paper's alternating dense and locally banded sparse attention is not modelled: every layer here
is dense, as in the Cerebras model zoo's and Megatron's GPT-3 configurations.

Two rows of table 2.1 are internally inconsistent, and we use the shapes that the authors
confirmed to Cerebras (Cerebras model zoo, modelzoo/transformers/pytorch/gpt3/configs):
- GPT-3 XL (1.3B): the paper says 24 heads of d_head 128, but 24 x 128 = 3072, not d_model 2048.
  We use 16 heads of 128 (params_gpt3_xl.yaml: "Paper says 24 but was typo. Confirmed with
  authors"); EleutherAI's GPT-Neo 1.3B and Cerebras-GPT 1.3B also use 16 heads at 2048.
- GPT-3 13B: the paper says d_model 5140, but 40 heads x d_head 128 = 5120, and 5140 / 40 is not
  an integer. We use 5120 (params_gpt3_13b.yaml: "Paper says 5140 but was typo. Confirmed with
  authors"); Cerebras-GPT 13B and OPT-13B are also 5120 wide.

GPT-3 30B is not in the GPT-3 paper; the Argonne study (Emani et al. 2023, sparsity on the CS-2)
runs a "GPT-3 30B" without giving its shape. We use the published 30B GPT-style shape of OPT-30B
(Zhang et al. 2022, "OPT: Open Pre-trained Transformer Language Models", table 1: 48 layers,
56 heads, d_model 7168, d_head 128; the same shape is "gpt3_30B" in at least one public
Megatron-DeepSpeed launch script), at GPT-3's vocabulary and 2048 positions. Whether the
study's 30B had exactly this shape is not verified.
"""

from __future__ import annotations

from accelbench.config.model import ModelConfig
from accelbench.config.preset_registry import GPT2_VOCAB, register

GPT3_POSITIONS = 2048

# name -> (n_layer, n_head, d_model, nominal parameter count)
GPT3_SHAPES: dict[str, tuple[int, int, int, int]] = {
    "gpt3-125m": (12, 12, 768, 125_000_000),  # GPT-3 Small
    "gpt3-350m": (24, 16, 1024, 350_000_000),  # GPT-3 Medium
    "gpt3-760m": (24, 16, 1536, 760_000_000),  # GPT-3 Large
    "gpt3-1.3b": (24, 16, 2048, 1_300_000_000),  # GPT-3 XL (paper's 24 heads: a typo, see above)
    "gpt3-2.7b": (32, 32, 2560, 2_700_000_000),
    "gpt3-6.7b": (32, 32, 4096, 6_700_000_000),  # the study's sparsity run "GPT-3 6.7B"
    "gpt3-13b": (40, 40, 5120, 13_000_000_000),  # paper's 5140: a typo, see above
    "gpt3-30b": (48, 56, 7168, 30_000_000_000),  # OPT-30B's shape, see above
    "gpt3-175b": (96, 96, 12288, 175_000_000_000),
}


def gpt3(name: str) -> ModelConfig:
    """One GPT-3 shape as our GPT-2-architecture config."""
    n_layer, n_head, d_model, _ = GPT3_SHAPES[name]
    return ModelConfig(name, n_layer, n_head, d_model, GPT2_VOCAB, GPT3_POSITIONS)


GPT3_PRESETS: tuple[ModelConfig, ...] = tuple(gpt3(name) for name in GPT3_SHAPES)

for _cfg in GPT3_PRESETS:
    register(_cfg)
