"""Mixture-of-experts presets: Mixtral 8x7B and 8x22B (v0.1), DeepSeek-MoE 16B, and a tiny MoE
for tests and CPU runs.

Shapes are those of the released Hugging Face config.json files. Mixtral: the Mistral 7B
layout (RMSNorm, grouped-query rotary attention, base 1e6, untied head, no biases) with 8
SwiGLU experts of 14336 (8x22B: 16384) per layer, top-2, softmax gates renormalised over the
two, router_aux_loss_coef 0.02 (8x22B: 0.001). DeepSeek-MoE 16B (deepseek-moe-16b-base): 28
layers, multi-head attention, the first layer dense (10944 wide), the other 27 with 64 routed
experts of 1408 (top-6, softmax gates not renormalised) and 2 shared experts, aux_loss_alpha
0.001. The total parameter counts match the published ones exactly (tests/unit/test_moe.py):
46,702,792,704, 140,620,634,112 and 16,375,728,128.
"""

from __future__ import annotations

from accelbench.config.model import ModelConfig
from accelbench.config.preset_registry import register
from accelbench.config.presets_llama import LLAMA2_BASE, LLAMA2_VOCAB, llama, llama_ffn_dim

MIXTRAL_BASE = 1_000_000.0
DEEPSEEK_VOCAB = 102400

MOE_PRESETS: tuple[ModelConfig, ...] = (
    llama("mixtral-8x7b", 32, 32, 4096, 8, 14336, LLAMA2_VOCAB, 32768, MIXTRAL_BASE,
          n_experts=8, moe_top_k=2, aux_loss_coef=0.02),
    llama("mixtral-8x22b", 56, 48, 6144, 8, 16384, LLAMA2_VOCAB, 65536, MIXTRAL_BASE,
          n_experts=8, moe_top_k=2, aux_loss_coef=0.001),
    llama("deepseek-moe-16b", 28, 16, 2048, 16, 10944, DEEPSEEK_VOCAB, 4096, LLAMA2_BASE,
          layer_norm_eps=1e-6, n_experts=64, moe_top_k=6, moe_norm_topk=False,
          n_shared_experts=2, moe_ffn_dim=1408, moe_first_dense=1, aux_loss_coef=0.001),
    # Two MoE layers of 8 SwiGLU experts (top-2, one shared) on llama-tiny's attention, for
    # tests and the CPU benchmark; 8 experts divide over 2 or 4 expert-parallel ranks.
    llama("moe-tiny", 2, 4, 128, 2, llama_ffn_dim(128, 64), LLAMA2_VOCAB, 256, LLAMA2_BASE,
          n_experts=8, moe_top_k=2, n_shared_experts=1, moe_ffn_dim=128, aux_loss_coef=0.01),
)

for _cfg in MOE_PRESETS:
    register(_cfg)
