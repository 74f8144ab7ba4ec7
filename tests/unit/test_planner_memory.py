"""Planner memory: ZeRO's worked example, Korthikanti's formulas, pipeline in-flight counts."""

from __future__ import annotations

import pytest

from accelbench.analytics.activations import activation_bytes_per_layer
from accelbench.analytics.memory import (
    block_train_bytes,
    inflight_layer_microbatches,
    memory_per_device,
)
from accelbench.analytics.model_states import model_state_bytes, stage_params
from accelbench.analytics.params import total_params
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.config.presets import get_preset

PSI = 7.5e9  # ZeRO paper sec. 5: a 7.5B model on 64 GPUs, mixed-precision Adam (K = 12)
GPT3 = ModelConfig("gpt3-175b", 96, 96, 12288, 51200, 2048)


@pytest.mark.parametrize("zero,expected_gb", [(0, 120.0), (1, 31.40625), (2, 16.640625),
                                              (3, 1.875)])
def test_zero_worked_example(zero: int, expected_gb: float) -> None:
    # 16 Psi, 4 Psi + 12 Psi/N, 2 Psi + 14 Psi/N, 16 Psi/N with Psi = 7.5e9, N = 64
    states = model_state_bytes(PSI, dp=64, zero=zero, dtype="fp16", optimizer="adam")
    assert states.total / 1e9 == pytest.approx(expected_gb)


def test_zero_fp32_adam_is_still_16_bytes() -> None:
    # fp32 weights need no master copy: 4 + 4 + 8 (m, v)
    assert model_state_bytes(1.0, dtype="fp32").total == 16


def test_korthikanti_activation_formulas() -> None:
    # sec. 4-5 of 2205.05198, 16-bit values: s=2048, b=1, h=12288, a=96, t=8
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    assert activation_bytes_per_layer(GPT3, s, b) == pytest.approx(sbh * (34 + 5 * a * s / h))
    assert activation_bytes_per_layer(GPT3, s, b, tp=t) == pytest.approx(
        sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert activation_bytes_per_layer(GPT3, s, b, tp=t, sp=True) == pytest.approx(
        sbh / t * (34 + 5 * a * s / h))
    assert activation_bytes_per_layer(GPT3, s, b, tp=t, sp=True, recompute="selective") == \
        pytest.approx(34 * sbh / t)
    assert activation_bytes_per_layer(GPT3, s, b, recompute="full") == pytest.approx(2 * sbh)


def test_block_train_bytes_signature_unchanged() -> None:
    cfg = get_preset("gpt2-xl")
    assert block_train_bytes(cfg, 1024, 8, "bf16") > activation_bytes_per_layer(cfg, 1024, 8)


def test_inflight_1f1b_and_interleaved_by_hand() -> None:
    # 1F1B, p=4, m=8: the first stage holds 4 micro-batches of 24/4 = 6 layers = 24 layers;
    # the last holds 1 micro-batch of 6 layers; with m=2 < p the first holds 2 x 6.
    assert inflight_layer_microbatches(24, 4, 1, 8) == 24
    assert inflight_layer_microbatches(24, 4, 1, 8, rank=3) == 6
    assert inflight_layer_microbatches(24, 4, 1, 2) == 12
    # interleaved v=2: warm-up 2*(4-1) + (2-1)*4 = 10 chunks, +1 = 11 chunks of 3 layers = 33
    # = L * (1 + (p-1)/(p*v)) = 24 * (1 + 3/8)
    assert inflight_layer_microbatches(24, 4, 2, 8) == 33 == 24 * (1 + 3 / 8)


def test_stage_params_sum_to_model_without_pipeline() -> None:
    cfg = get_preset("gpt2-xl")
    padding = (cfg.padded_vocab - cfg.vocab_size) * cfg.d_model  # rows held, never used
    assert padding == 47 * 1600
    assert stage_params(cfg, 1, 1, "first") == total_params(cfg) + padding
    llama = get_preset("llama3-8b")  # RMSNorm: the final norm has no bias
    assert stage_params(llama, 1, 1, "first") == total_params(llama) == 8_030_261_248
    # tp=1, pp=2 holds each end's half of the blocks and a copy of the tied embedding each
    first, last = stage_params(cfg, 1, 2, "first"), stage_params(cfg, 1, 2, "last")
    assert first + last > total_params(cfg)


def test_replicated_vocabulary_keeps_embedding_and_logits_whole() -> None:
    """accelbench's own tensor parallel (vocab_parallel=False): embedding and head whole."""
    cfg = get_preset("gpt2-xl")
    h, v, rows = cfg.d_model, cfg.vocab_size, cfg.padded_vocab
    split = stage_params(cfg, 2, 1, "first")
    whole = stage_params(cfg, 2, 1, "first", vocab_parallel=False)
    assert whole - split == pytest.approx(rows * h / 2)  # the other half of the tied embedding
    lay = Layout(dp=1, tp=2, mb=4, sp=True)
    a = memory_per_device(cfg, 1024, lay, 1, "bf16", vocab_parallel=False)
    b = memory_per_device(cfg, 1024, lay, 1, "bf16")
    logits_half = 1024 * 4 * v / 2 * (2 + 12)  # bf16 logits + 3 fp32 tensors of the loss
    assert a.activations - b.activations == pytest.approx(logits_half)
    assert a.states.params - b.states.params == pytest.approx(2 * rows * h / 2)  # bf16 bytes


def test_memory_per_device_gpt3_megatron_layout() -> None:
    # t=8, p=8, selective + SP, b=1, m=96: the first stage holds 96 layers' 34*sbh/t bytes
    layout = Layout(dp=16, tp=8, pp=8, mb=1, zero=0, recompute="selective", sp=True)
    mem = memory_per_device(GPT3, 2048, layout, 96, "bf16", "adam", 80e9)
    assert mem.activations == pytest.approx(96 * 34 * 2048 * 12288 / 8)
    n_first = stage_params(GPT3, 8, 8, "first")
    assert mem.states.total == pytest.approx(16 * n_first)
    assert mem.fits and mem.total < 80e9 * 0.92
    # the same without any parallelism cannot fit on one 80 GB device
    single = memory_per_device(GPT3, 2048, Layout(dp=1), 1, "bf16", "adam", 80e9)
    assert not single.fits


def test_fused_attention_stores_no_scores():
    """Flash/memory-efficient SDPA keeps what selective recompute keeps: sbh(10 + 24/t)."""
    from accelbench.analytics.activations import activation_bytes_per_layer
    from accelbench.config.presets import get_preset

    cfg = get_preset("gpt2-xl")
    s, b, h = 1024, 8, 1600
    fused = activation_bytes_per_layer(cfg, s, b, 2, fused_attention=True)
    assert fused == s * b * h * 34
    assert activation_bytes_per_layer(cfg, s, b, 2) == s * b * h * (34 + 5 * 25 * s / h)


def _sequential(d_ff: int) -> ModelConfig:
    """GenSLM-2.5B's widths (h=3840, 32 heads) with a sequential residual and MLP width d_ff."""
    return ModelConfig("narrow", 28, 32, 3840, 69, 2048, d_ff=d_ff)


def test_mlp_share_scales_with_the_mlp_width() -> None:
    """Korthikanti's MLP share 19sbh is 3sbh + 4sbf at f = 4h; a narrow MLP costs less."""
    s, b, h, f, a = 256, 1, 3840, 4096, 32
    sbh, sbf = s * b * h, s * b * f
    cfg = _sequential(f)
    assert activation_bytes_per_layer(cfg, s, b, fused_attention=True) == 18 * sbh + 4 * sbf
    assert activation_bytes_per_layer(cfg, s, b) == 18 * sbh + 4 * sbf + 5 * a * s * s * b
    # d_ff = 4h explicitly is the paper's 34sbh (as d_ff = 0 is)
    assert activation_bytes_per_layer(_sequential(4 * h), s, b, recompute="selective") == \
        34 * sbh
    # the old 34sbh charged GenSLM-2.5B's f ~ 1.07h MLP as if it were 4h: 33.4 MB at s=256
    assert activation_bytes_per_layer(cfg, s, b, fused_attention=True) < 0.66 * 34 * sbh


def test_mlp_width_under_tensor_and_sequence_parallel() -> None:
    """Only the split part (8sbh + 4sbf) and the scores shrink with t; SP splits the rest."""
    s, b, h, f, a, t = 512, 2, 3840, 4096, 32, 4
    sbh, sbf, scores = s * b * h, s * b * f, 5 * a * s * s * b
    cfg = _sequential(f)
    split = 8 * sbh + 4 * sbf
    assert activation_bytes_per_layer(cfg, s, b, tp=t) == pytest.approx(
        10 * sbh + (split + scores) / t)
    assert activation_bytes_per_layer(cfg, s, b, tp=t, sp=True) == pytest.approx(
        (10 * sbh + split + scores) / t)
    assert activation_bytes_per_layer(cfg, s, b, tp=t, recompute="selective") == pytest.approx(
        10 * sbh + split / t)
    assert activation_bytes_per_layer(cfg, s, b, tp=t, sp=True, recompute="full") == \
        pytest.approx(2 * sbh / t)
    # fp32 doubles every term
    assert activation_bytes_per_layer(cfg, s, b, 4, tp=t) == pytest.approx(
        2 * activation_bytes_per_layer(cfg, s, b, 2, tp=t))


def test_parallel_residual_saves_one_layer_norm_input() -> None:
    """GPT-NeoX's two LayerNorms read the same tensor, which autograd keeps once: -2sbh; its
    rotary Q and K are saved beside the QKV output that V keeps alive: +4sbh."""
    s, b, t = 256, 1, 4
    neox = get_preset("genslm-2.5b")
    assert neox.parallel_residual and neox.ffn_dim == 4096 and neox.position == "rotary"
    sbh, sbf = s * b * neox.d_model, s * b * neox.ffn_dim
    assert activation_bytes_per_layer(neox, s, b, fused_attention=True) == 20 * sbh + 4 * sbf
    sequential = _sequential(neox.ffn_dim)
    rotary_sequential = sequential.with_changes(position="rotary", rotary_pct=0.25)
    assert (activation_bytes_per_layer(rotary_sequential, s, b, tp=t, sp=True)
            - activation_bytes_per_layer(neox, s, b, tp=t, sp=True)) == pytest.approx(2 * sbh / t)
    assert (activation_bytes_per_layer(rotary_sequential, s, b, tp=t, sp=True)
            - activation_bytes_per_layer(sequential, s, b, tp=t, sp=True)) == pytest.approx(
                4 * sbh / t)


def test_sequence_parallel_is_a_choice_of_the_layout() -> None:
    """sp is a plain choice (off unless given); TP without SP keeps the replicated 10sbh
    whole."""
    assert Layout(dp=1, tp=8).sp is False and Layout(dp=1, tp=8, sp=True).sp is True
    off, on = Layout(dp=16, tp=8, pp=8), Layout(dp=16, tp=8, pp=8, sp=True)
    a = memory_per_device(GPT3, 2048, off, 96, fused_attention=True)
    b = memory_per_device(GPT3, 2048, on, 96, fused_attention=True)
    sbh = 2048 * 12288
    assert a.activations - b.activations == pytest.approx(96 * 10 * sbh * (1 - 1 / 8))
