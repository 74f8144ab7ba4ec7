"""The peer implementations our benchmarks run against, built with our model's shape."""

from __future__ import annotations

from transformers import GPT2Config, GPT2LMHeadModel

from accelbench.config.model import ModelConfig


def hf_gpt2(cfg: ModelConfig) -> GPT2LMHeadModel:
    """transformers' GPT2LMHeadModel with our shape, no dropout, SDPA attention."""
    config = GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.n_positions,
                        n_embd=cfg.d_model, n_layer=cfg.n_layer, n_head=cfg.n_head,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        activation_function="gelu_new")
    config._attn_implementation = "sdpa"  # the constructor keyword moved between releases
    return GPT2LMHeadModel(config)
