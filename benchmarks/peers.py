"""The peer implementations our benchmarks run against, built with our model's shape."""

from __future__ import annotations

from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from accelbench.config.model import ModelConfig


def hf_gpt2(cfg: ModelConfig) -> GPT2LMHeadModel:
    """transformers' GPT2LMHeadModel with our shape, no dropout, SDPA attention."""
    config = GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.n_positions,
                        n_embd=cfg.d_model, n_layer=cfg.n_layer, n_head=cfg.n_head,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        activation_function="gelu_new")
    config._attn_implementation = "sdpa"  # the constructor keyword moved between releases
    return GPT2LMHeadModel(config)


def hf_llama(cfg: ModelConfig) -> LlamaForCausalLM:
    """transformers' LlamaForCausalLM with our Llama-style shape (GQA, SwiGLU, RMSNorm, rotary
    base), no dropout, SDPA attention."""
    config = LlamaConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model,
                         intermediate_size=cfg.ffn_dim, num_hidden_layers=cfg.n_layer,
                         num_attention_heads=cfg.n_head, num_key_value_heads=cfg.kv_heads,
                         max_position_embeddings=cfg.n_positions, rms_norm_eps=cfg.layer_norm_eps,
                         rope_parameters={"rope_type": "default", "rope_theta": cfg.rotary_base},
                         tie_word_embeddings=cfg.tie_embeddings, attention_dropout=0.0)
    config._attn_implementation = "sdpa"
    return LlamaForCausalLM(config)
