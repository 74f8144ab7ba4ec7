"""GPT-3 family presets: shapes, parameter counts against nominal sizes and published counts."""

from __future__ import annotations

import pytest
import torch

from accelbench.analytics.params import total_params
from accelbench.config import get_preset
from accelbench.config.presets import preset_names
from accelbench.models.gpt import GPT

# name: (layers, heads, hidden, nominal params, exact total_params)
# Exact counts = 12 L d^2 + 13 L d + (50257 + 2048) d + 2 d (tied head, learned positions).
GPT3_TABLE = {
    "gpt3-125m": (12, 12, 768, 125e6, 125_226_240),
    "gpt3-350m": (24, 16, 1024, 350e6, 355_871_744),
    "gpt3-760m": (24, 16, 1536, 760e6, 760_300_032),
    "gpt3-1.3b": (24, 16, 2048, 1.3e9, 1_315_723_264),
    "gpt3-2.7b": (32, 32, 2560, 2.7e9, 2_651_553_280),
    "gpt3-6.7b": (32, 32, 4096, 6.7e9, 6_658_404_352),
    "gpt3-13b": (40, 40, 5120, 13e9, 12_853_386_240),
    "gpt3-30b": (48, 56, 7168, 30e9, 29_974_418_432),
    "gpt3-175b": (96, 96, 12288, 175e9, 174_604_259_328),
}


def _hand_count(n_layer: int, d: int) -> int:
    """GPT-2 architecture by hand: QKV+proj 4d^2+4d, MLP 8d^2+5d, two norms 4d per layer."""
    return n_layer * (12 * d * d + 13 * d) + (50257 + 2048) * d + 2 * d


@pytest.mark.parametrize("name", sorted(GPT3_TABLE))
def test_shape_and_params(name: str) -> None:
    n_layer, n_head, d_model, nominal, exact = GPT3_TABLE[name]
    cfg = get_preset(name)
    assert (cfg.n_layer, cfg.n_head, cfg.d_model) == (n_layer, n_head, d_model)
    assert (cfg.vocab_size, cfg.n_positions, cfg.ffn_dim) == (50257, 2048, 4 * d_model)
    assert cfg.position == "learned" and cfg.tie_embeddings and not cfg.parallel_residual
    assert d_model % n_head == 0
    assert total_params(cfg) == exact == _hand_count(n_layer, d_model)
    assert abs(exact - nominal) / nominal < 0.03


def test_all_registered() -> None:
    assert set(GPT3_TABLE) <= set(preset_names())


def test_paper_typos_resolved_to_128_wide_heads() -> None:
    # Table 2.1 says 24 heads for XL and d_model 5140 for 13B; both have d_head 128 in the paper.
    assert get_preset("gpt3-1.3b").head_dim == 128
    assert get_preset("gpt3-13b").head_dim == 128
    assert get_preset("gpt3-30b").head_dim == 128


def test_counts_match_cerebras_gpt_published_sizes() -> None:
    # Cerebras-GPT (same architecture, vocab and positions) publishes 1,316M, 2,652M and 6,658M.
    published_m = {"gpt3-1.3b": 1316, "gpt3-2.7b": 2652, "gpt3-6.7b": 6658}
    for name, millions in published_m.items():
        assert round(total_params(get_preset(name)) / 1e6) == millions


def test_built_model_has_the_counted_parameters() -> None:
    with torch.device("meta"):
        model = GPT(get_preset("gpt3-350m"))
    assert model.num_params() == GPT3_TABLE["gpt3-350m"][4]
