"""Analytics FLOPs equal torch's operator-level count (FlopCounterMode), forward and backward."""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from accelbench.analytics.flops import (
    block_flops,
    hardware_flops_per_token,
    model_flops_per_step,
    model_flops_per_token,
)
from accelbench.config.presets import get_preset
from accelbench.models.gpt import GPT, Block


def _count(fn) -> int:
    """FLOPs torch counts for fn; attention through the math backend, which the counter sees as
    matmuls (on CPU the fused flash kernel is not registered with FlopCounterMode)."""
    counter = FlopCounterMode(display=False)
    with counter, sdpa_kernel(SDPBackend.MATH):
        fn()
    return counter.get_total_flops()


def _block_counts(cfg, batch, seq):
    block = Block(cfg)
    x = torch.randn(batch, seq, cfg.d_model, requires_grad=True)
    y = None

    def forward():
        nonlocal y
        y = block(x)

    fwd = _count(forward)
    bwd = _count(lambda: y.backward(torch.ones_like(y)))
    return fwd, bwd


@pytest.mark.parametrize("name,batch,seq", [("gpt2", 2, 128), ("gpt2-tiny", 3, 64)])
def test_block_flops_match_flop_counter(name, batch, seq):
    cfg = get_preset(name)
    fwd, bwd = _block_counts(cfg, batch, seq)
    expected = block_flops(cfg, seq, batch)
    assert expected.forward == pytest.approx(fwd, rel=0.01)
    assert expected.backward == pytest.approx(bwd, rel=0.01)


@pytest.mark.parametrize("variant", [{}, {"position": "rotary", "rotary_pct": 0.25,
                                          "tie_embeddings": False, "parallel_residual": True}])
def test_model_flops_match_flop_counter(variant):
    cfg = get_preset("gpt2-tiny").with_changes(**variant)
    model = GPT(cfg)
    batch, seq = 2, 96
    idx = torch.randint(0, cfg.vocab_size, (batch, seq))
    out = {}

    def forward():
        out["loss"] = model(idx, idx)[1]

    fwd = _count(forward)
    bwd = _count(lambda: out["loss"].backward())
    expected = model_flops_per_step(cfg, seq, batch * seq)
    assert expected.forward == pytest.approx(fwd, rel=0.01)
    assert expected.backward == pytest.approx(bwd, rel=0.01)


def test_gpt2_xl_per_token_by_hand():
    """6N + 12*L*H*Q*T with N = 48*12*1600^2 + 50257*1600 (matmul weights), T = 1024."""
    cfg = get_preset("gpt2-xl")
    n = 48 * 12 * 1600**2 + 50257 * 1600
    assert model_flops_per_token(cfg, 1024).total == 6 * n + 12 * 48 * 1600 * 1024


@pytest.mark.parametrize("recompute", ["none", "full"])
@pytest.mark.parametrize("variant", [{}, {"position": "rotary", "rotary_pct": 0.25, "d_ff": 96,
                                          "tie_embeddings": False, "parallel_residual": True}])
def test_hardware_flops_count_what_recompute_reruns(recompute, variant):
    """HFU's numerator: forward + backward + what torch's checkpoint really reruns (its early
    stop skips each block's last matmul under full recompute). Selective is left out: it reruns
    one fused attention kernel (both matmuls), which the counter sees only through the math
    backend, where the early stop would skip the AV matmul that the fused kernel cannot."""
    cfg = get_preset("gpt2-tiny").with_changes(vocab_size=256, **variant)  # blocks dominate
    model = GPT(cfg)
    model.set_recompute(recompute)
    batch, seq = 2, 64
    idx = torch.randint(0, cfg.vocab_size, (batch, seq))

    def step():
        model(idx, idx)[1].backward()

    expected = hardware_flops_per_token(cfg, seq, recompute, early_stop=True) * batch * seq
    assert expected == pytest.approx(_count(step), rel=0.01)
    if recompute == "full":  # without the early stop the count would be off by a visible share
        whole = hardware_flops_per_token(cfg, seq, recompute) * batch * seq
        assert whole > expected * 1.02
