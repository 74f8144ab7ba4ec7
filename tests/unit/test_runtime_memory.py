"""accelbench's own memory estimate (analytics/runtime_memory.py), by hand on gpt2-tiny: the
widths the runtime keeps (fp32 weights, gradients and AdamW moments whatever the precision),
DDP's buckets, ZeRO-1's sharded moments, FSDP2's unsharded parameters under its bf16 policy, and
the planner's published widths left as they were."""

import pytest

from accelbench.analytics.memory import memory_per_device
from accelbench.analytics.runtime_memory import (
    BACKWARD_END,
    FORWARD_END,
    RUNTIME,
    runtime_memory_per_device,
    runtime_widths,
)
from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout
from accelbench.config.presets import get_preset
from accelbench.config.runtime_settings import LEAN, LEGACY, applied, parse_runtime

CFG = get_preset("gpt2-tiny")  # 2 layers, d_model 128, vocabulary padded to 50304, tied head
VH = 50304 * 128  # the embedding (and tied head)
BLOCK = 198272  # one block: 196608 GEMM weights, 1152 biases, two norms of 256
P = VH + 256 * 128 + 2 * BLOCK + 256  # embedding, learned positions, blocks, final norm
SEQ = 8


def _estimate(layout: Layout, dtype: str, settings=LEAN, n_micro: int = 1):
    return runtime_memory_per_device(CFG, SEQ, layout, n_micro, dtype, settings)


def test_widths_are_the_runtimes_in_every_precision():
    for dtype in ("fp32", "fp16", "bf16", "fp8"):
        w = runtime_widths(dtype)
        assert (w.weights, w.grads, w.moments) == (4, 4, 8)  # autocast keeps fp32 weights
    assert (runtime_widths("fp32").cast, runtime_widths("bf16").cast) == (0, 2)
    assert (runtime_widths("fp8").cast, runtime_widths("fp8").head_cast) == (1, 2)
    fsdp = Layout(dp=2, zero=3)
    assert (runtime_widths("bf16", fsdp).gathered, runtime_widths("bf16", fsdp).reduce) == (2, 4)
    assert runtime_widths("bf16", fsdp, parse_runtime("reduce=bf16")).reduce == 2
    assert runtime_widths("bf16", fsdp, parse_runtime("fsdp_mp=off")).gathered == 4
    assert runtime_widths("fp32", fsdp).gathered == 4  # the policy is for bf16 cells only


def test_one_process_states_are_16_bytes_a_parameter_and_the_embeddings_gradient():
    """fp32 weights, gradients and two moments (16 P); at the end of the backward the tied
    embedding's whole gradient (4 V h) beside them; the estimate names its widths and moment."""
    b = _estimate(Layout(), "fp32")
    assert b.widths == RUNTIME
    assert (b.states.params, b.states.optimizer) == (4 * P, 8 * P)
    backward = 16 * P + 2 * 4 * VH  # fp32: its new gradient and the sum, as measured on gpt2
    if b.moment == BACKWARD_END:
        assert b.total == backward and b.activations == 0
    else:  # the forward's end: no gradient yet but the head's, the activations alive
        assert b.moment == FORWARD_END and b.states.grads == 0
        assert b.total == 12 * P + b.activations + 4 * VH > backward


def test_ddp_buckets_are_a_gradient_copy_unless_the_gradients_are_their_views():
    legacy = _estimate(Layout(dp=2), "fp32", LEGACY)
    assert legacy.moment == BACKWARD_END
    # weights, grads, moments, buckets; the embedding's new gradient and its fp32 sum
    assert legacy.total == (4 + 4 + 8 + 4) * P + 2 * 4 * VH
    lean = _estimate(Layout(dp=2), "fp32")
    assert lean.states.grads == 0  # the buckets hold them, and a third V x h, the bucket's copy
    assert lean.total == max(16 * P + 3 * 4 * VH, 16 * P + lean.activations + 4 * VH)
    assert lean.total < legacy.total
    bf16 = _estimate(Layout(dp=2), "bf16")
    casts = 2 * (2 * 196608 + VH)  # bf16 copies of the block GEMMs and the head, kept for backward
    head_grad = (2 + 4) * VH  # the head's bf16 gradient and its fp32 copy, for a moment
    # at the backward's end under autocast: the embedding's gradient and the bucket's copy
    assert bf16.total == max(16 * P + 2 * 4 * VH, 16 * P + bf16.activations + casts + head_grad)


def test_zero1_shards_the_moments_only():
    b = _estimate(Layout(dp=2, zero=1), "fp32", LEGACY)
    assert (b.states.params, b.states.optimizer) == (4 * P, 8 * P / 2)
    # weights, buckets, gradients, half the moments; the embedding's gradient and its fp32 sum
    assert b.total == (4 + 4 + 4 + 4) * P + 2 * 4 * VH


def test_fsdp2_zero3_holds_the_root_and_two_blocks_unsharded_in_bf16():
    b = _estimate(Layout(dp=2, zero=3), "bf16")
    assert (b.states.params, b.states.optimizer) == (4 * P / 2, 8 * P / 2)
    root = P - 2 * BLOCK
    forward = _estimate(Layout(dp=2, zero=3, mb=64), "bf16")  # activations make it the peak
    assert forward.moment == FORWARD_END
    unsharded = 2 * (root + 2 * BLOCK)  # bf16: the root and both blocks (two of two)
    assert forward.buffers == unsharded + 2 * VH  # and the head's bf16 gradient
    assert b.total <= forward.total


def test_the_planner_keeps_the_published_widths():
    b = memory_per_device(CFG, SEQ, Layout(dp=2), 1, "bf16")
    assert b.widths == "published" and b.moment == "sum"
    assert b.states.params == pytest.approx(2 * P, rel=0.02)  # 16-bit weights (vocab-parallel
    # counting aside), against the runtime's 4 bytes


def test_settings_recorded_only_where_a_layout_uses_them():
    assert applied(LEAN, Layout(), "bf16") == {}
    assert applied(LEAN, Layout(dp=2), "bf16") == {"ddp_views": True}
    assert applied(LEAN, Layout(dp=2, zero=1), "fp32") == {"ddp_views": True, "zero_views": True}
    assert applied(LEAN, Layout(dp=2, zero=3), "bf16") == {"fsdp_mp": True, "reduce": "fp32"}
    assert applied(LEAN, Layout(dp=2, zero=3), "fp32") == {}
    assert applied(LEAN, Layout(tp=2), "bf16") == {}


@pytest.mark.parametrize("text", ["ddp_views=maybe", "reduce=fp16", "buckets=off"])
def test_a_bad_runtime_setting_is_one_line_naming_it(text):
    with pytest.raises(ConfigError) as err:
        parse_runtime(text)
    assert "\n" not in str(err.value) and str(err.value).startswith("runtime:")
