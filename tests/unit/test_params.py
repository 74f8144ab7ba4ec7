"""Parameter counts equal the public GPT-2 checkpoints' (tied embedding counted once)."""

import pytest
import torch

from accelbench.analytics.params import matmul_params, total_params
from accelbench.config.presets import get_preset
from accelbench.models.gpt import GPT

PUBLIC_COUNTS = {"gpt2": 124_439_808, "gpt2-xl": 1_557_611_200}


@pytest.mark.parametrize("name", sorted(PUBLIC_COUNTS))
def test_analytics_count_matches_public_checkpoint(name):
    assert total_params(get_preset(name)) == PUBLIC_COUNTS[name]


@pytest.mark.parametrize("name", ["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"])
def test_torch_model_count_matches_analytics(name):
    cfg = get_preset(name)
    with torch.device("meta"):
        model = GPT(cfg)
    assert model.num_params() == total_params(cfg)


def test_matmul_params_leave_out_positions_biases_and_norms():
    cfg = get_preset("gpt2")
    h, v, layers = 768, 50257, 12
    assert matmul_params(cfg) == layers * 12 * h * h + v * h


def test_untied_rotary_model_counts_its_head_and_no_positions():
    cfg = get_preset("gpt2-tiny").with_changes(position="rotary", tie_embeddings=False,
                                               parallel_residual=True, rotary_pct=0.25)
    model = GPT(cfg)
    assert model.num_params() == total_params(cfg)
