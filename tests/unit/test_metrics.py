"""MFU, HFU, TFLOPS and scaling arithmetic against hand calculations."""

import pytest

from accelbench.analytics.flops import hardware_flops_per_token, model_flops_per_token
from accelbench.analytics.throughput import scaling_efficiency, speedup, tflops, utilisation
from accelbench.config.presets import get_preset
from accelbench.hardware.specs import get_spec


def test_tflops_and_mfu_by_hand():
    assert tflops(3e12, 2.0) == pytest.approx(1.5)
    assert utilisation(3e12, 2.0, 312e12) == pytest.approx(1.5 / 312)
    assert utilisation(3e12, 2.0, None) is None


def test_mfu_of_gpt2_xl_on_a100_by_hand():
    """20k tokens/s of GPT-2 XL at T=1024 on one A100 in bf16."""
    cfg = get_preset("gpt2-xl")
    per_token = model_flops_per_token(cfg, 1024).total
    peak = get_spec("a100-80gb").peak_flops_per_s("bf16")
    tokens_per_s = 20_000
    mfu = utilisation(per_token * tokens_per_s, 1.0, peak)
    by_hand = tokens_per_s * (6 * (48 * 12 * 1600**2 + 50257 * 1600)
                              + 12 * 48 * 1600 * 1024) / 312e12
    assert mfu == pytest.approx(by_hand)
    assert 0.6 < mfu < 0.7


def test_hfu_counts_recompute():
    cfg = get_preset("gpt2")
    model = model_flops_per_token(cfg, 1024)
    full = hardware_flops_per_token(cfg, 1024, "full")
    selective = hardware_flops_per_token(cfg, 1024, "selective")
    assert hardware_flops_per_token(cfg, 1024, "none") == model.total
    # full recompute reruns the blocks' forward (not the output head)
    assert full - model.total == pytest.approx(model.forward - 2 * 50257 * 768)
    assert selective - model.total == pytest.approx(12 * 4 * 1024 * 768)


def test_scaling_arithmetic():
    assert speedup(10.0, 2.5) == 4.0
    assert scaling_efficiency(throughput=606.4, base_throughput=10.0, devices=80) == 0.758
    with pytest.raises(ValueError):
        tflops(1.0, 0.0)
