"""Bytes per step that this implementation sends, by hand (tests/dist/test_comm_bytes.py checks
the same accounting against the profiler's collectives)."""

from __future__ import annotations

import pytest

from accelbench.config.layout import Layout
from accelbench.config.presets import get_preset
from accelbench.parallel.collectives import (
    busiest_rank_comm_bytes,
    comm_bytes_per_step,
    comm_calls_per_step,
)
from accelbench.parallel.rank_params import local_param_count

TINY = get_preset("gpt2-tiny").with_changes(n_layer=2, n_positions=64, vocab_size=1024)
H, F, V = 128, 512, 1024
BLOCK = 4 * H * H + 2 * H * F + 9 * H + F  # 198272, as GPT counts it
PSI = 4 * (2 * BLOCK + V * H + 64 * H + 2 * H)  # fp32 gradient bytes, tied head once
ACT = 4 * 2 * 32 * H  # one fp32 b*s*h message: micro-batch 2, sequence 32
M = 2  # micro-batches


def _dp(layout: Layout, backend: str = "nccl") -> float:
    return comm_bytes_per_step(TINY, layout, 32, 2, M, "fp32", backend=backend)[
        "dp_bytes_per_step"]


def test_local_parameters_count_embeddings_whole_and_the_tied_copy():
    assert local_param_count(TINY, Layout(dp=2)) * 4 == PSI
    assert local_param_count(TINY, Layout(pp=2), 0) == BLOCK + V * H + 64 * H  # 337536
    assert local_param_count(TINY, Layout(pp=2), 1) == BLOCK + 2 * H + V * H  # head copy
    split = (4 * H * H + 2 * H * F + 3 * H + F) / 2 + 6 * H
    assert local_param_count(TINY, Layout(tp=2)) == 2 * split + V * H + 64 * H + 2 * H


def test_data_parallel_zero_stages_at_dp2_gas2():
    """n = 2: an all-reduce sends Psi, a gather, reduce-scatter or broadcast Psi/2."""
    assert _dp(Layout(dp=2)) == PSI  # DDP: one all-reduce per step (no_sync)
    assert _dp(Layout(dp=2, zero=1)) == PSI + PSI / 2  # + updated params broadcast: 3Psi(n-1)/n
    assert _dp(Layout(dp=2, zero=2)) == 2 * M * PSI / 2  # gather + reduce-scatter per micro-batch
    assert _dp(Layout(dp=2, zero=3)) == 3 * M * PSI / 2  # gathers again for the backward
    assert _dp(Layout(dp=2, zero=2), "gloo") == M * PSI / 2 + M * PSI  # gloo: RS is an all-reduce


def test_pipeline_with_a_tied_head():
    """pp = 2: each end stage sends one fp32 message per micro-batch (forward or backward), and
    both all-reduce the whole embedding gradient once per step; fp32 also under bf16."""
    for rank in (0, 1):
        out = comm_bytes_per_step(TINY, Layout(pp=2), 32, 2, M, "bf16", pp_rank=rank)
        assert out["pp_bytes_per_step"] == M * ACT
        assert out["tied_bytes_per_step"] == 4 * V * H  # 2(n-1)/n with n = 2
        assert out["dp_bytes_per_step"] == 0 and out["tp_bytes_per_step"] == 0
    middle = comm_bytes_per_step(TINY.with_changes(n_layer=4), Layout(pp=4), 32, 2, M, "fp32",
                                 pp_rank=1)
    assert middle["pp_bytes_per_step"] == 2 * M * ACT and middle["tied_bytes_per_step"] == 0
    rank, busiest = busiest_rank_comm_bytes(TINY.with_changes(n_layer=4), Layout(pp=4), 32, 2,
                                            M, "fp32")
    assert busiest["comm_bytes_per_step"] == max(
        comm_bytes_per_step(TINY.with_changes(n_layer=4), Layout(pp=4), 32, 2, M, "fp32",
                            pp_rank=r)["comm_bytes_per_step"] for r in range(4))


def test_pipeline_with_zero_defers_the_reduce_scatter():
    """dp = 2 x pp = 2: FSDP inside stages gathers once per step (zero 2) or m + 1 times
    (zero 3), reduce-scatters once; the tied all-reduce moves this rank's shard."""
    stage0 = 4 * (BLOCK + V * H + 64 * H)
    for zero, gathers in ((2, 1), (3, M + 1)):
        out = comm_bytes_per_step(TINY, Layout(dp=2, pp=2, zero=zero), 32, 2, M, "fp32")
        assert out["dp_bytes_per_step"] == pytest.approx((gathers + 1) * stage0 / 2)
        assert out["tied_bytes_per_step"] == 4 * V * H / 2
    out = comm_bytes_per_step(TINY, Layout(dp=2, pp=2, zero=1), 32, 2, M, "fp32")
    assert out["dp_bytes_per_step"] == stage0 + stage0 / 2
    # cp ranks are FSDP2's data-parallel ranks too: the shard is 1 / (dp x cp) of the embedding
    out = comm_bytes_per_step(TINY, Layout(dp=2, cp=2, pp=2, zero=2), 32, 2, M, "fp32")
    assert out["tied_bytes_per_step"] == 4 * V * H / 4


def test_tensor_parallel_dtypes_and_sequence_parallel_edges():
    """tp = 2, bf16: forward all-reduces in bf16, backward ones in fp32 (2 each per layer and
    micro-batch); SP moves the same bytes as gather + scatter, plus fp32 gathers at the edges."""
    calls = comm_calls_per_step(TINY, Layout(tp=2), 32, 2, M, "bf16")
    assert sorted((c.op, c.buffer_bytes, c.calls) for c in calls) == [
        ("all_reduce", ACT / 2, 2 * 2 * M), ("all_reduce", ACT, 2 * 2 * M)]
    tp = comm_bytes_per_step(TINY, Layout(tp=2), 32, 2, M, "bf16")["tp_bytes_per_step"]
    assert tp == 4 * M * (ACT / 2 + ACT)
    sp = comm_bytes_per_step(TINY, Layout(tp=2, sp=True), 32, 2, M, "bf16")
    assert sp["tp_bytes_per_step"] == tp + 2 * M * ACT / 2  # embedding grads and head input
    full = comm_bytes_per_step(TINY, Layout(tp=2), 32, 2, M, "bf16", "full")
    assert full["tp_bytes_per_step"] == tp + 4 * M * ACT / 2  # the forward again, in bf16
    pp_sp = comm_bytes_per_step(TINY, Layout(tp=2, pp=2, sp=True), 32, 2, M, "bf16")
    assert pp_sp["pp_bytes_per_step"] == M * ACT / 2  # each tp rank sends its sequence half


# Llama-style, one key/value head (shared by the tp ranks): hidden 128 in 4 heads of 32,
# SwiGLU 384 wide, RMSNorm (weight only), no biases
MQA = get_preset("llama-tiny").with_changes(n_positions=64, vocab_size=1024, n_kv_head=1)
D, FF = 32, 384
MQA_BLOCK = H * (H + 2 * D) + H * H + 3 * H * FF + 2 * H  # qkv, out, gate/up/down, 2 norms


def test_llama_local_parameters_split_everything_but_the_norms():
    """tp = 2: every matrix of a block halves (the shared head's [k | v] rows too, each rank
    a half), the two RMSNorm weights are whole; embedding, final norm and untied head whole."""
    assert local_param_count(MQA, Layout()) == 2 * MQA_BLOCK + 2 * V * H + H
    per_rank = (MQA_BLOCK - 2 * H) / 2 + 2 * H
    assert local_param_count(MQA, Layout(tp=2)) == 2 * per_rank + 2 * V * H + H


def test_shared_kv_head_gather_by_hand():
    """tp = 2 sharing one key/value head, bf16, micro-batch 2 x sequence 32: per layer and
    micro-batch one gather of the head's 2 x 32 [k | v] columns (8 KiB whole) in forward (twice
    under full recompute) and one reduce-scatter of its gradient; none when tp divides the
    key/value heads."""
    def kv_calls(cfg, layout, recompute="none"):
        calls = comm_calls_per_step(cfg, layout, 32, 2, M, "bf16", recompute)
        return [(c.op, c.buffer_bytes, c.calls, c.group_size) for c in calls
                if c.buffer_bytes == 2 * 32 * 2 * D * 2]
    assert kv_calls(MQA, Layout(tp=2)) == [("all_gather", 8192, 4, 2),
                                           ("reduce_scatter", 8192, 4, 2)]
    assert kv_calls(MQA, Layout(tp=2), "full")[0] == ("all_gather", 8192, 8, 2)
    assert kv_calls(MQA.with_changes(n_kv_head=2), Layout(tp=2)) == []
    four = MQA.with_changes(n_kv_head=2)  # tp = 4: each of 2 heads shared by 2 ranks
    assert [c[3] for c in kv_calls(four, Layout(tp=4))] == [2, 2]


def test_context_parallel_bytes_by_hand():
    """cp=2 (bf16, 2 layers, micro-batch 2, sequence 64, key/value width 128): each layer
    all-gathers the whole keys and values once a forward (twice with full recompute) and
    reduce-scatters their gradients, (cp-1)/cp of the buffer each; the gradients go over
    dp x cp = 4 ranks, as dp=4's do. The ideal is Megatron's ring: 3 passes of (cp-1) chunks."""
    from accelbench.parallel.collectives import comm_bytes_per_step
    from accelbench.parallel.ideal_comm import ideal_comm_bytes_per_step

    whole = 2 * 2 * 64 * 128 * 2  # keys and values of the whole sequence, bf16
    cp = comm_bytes_per_step(TINY, Layout(dp=2, cp=2), 64, 2, 1, "bf16")
    assert cp["cp_bytes_per_step"] == 2 * (whole / 2 + whole / 2)
    full = comm_bytes_per_step(TINY, Layout(dp=2, cp=2), 64, 2, 1, "bf16", "full")
    assert full["cp_bytes_per_step"] == 2 * (2 * whole / 2 + whole / 2)
    dp4 = comm_bytes_per_step(TINY, Layout(dp=4), 64, 2, 1, "bf16")
    assert cp["dp_bytes_per_step"] == dp4["dp_bytes_per_step"] > 0
    ideal = ideal_comm_bytes_per_step(TINY, Layout(dp=2, cp=2), 64, 2, 1, "bf16", 1e6)
    assert ideal["cp_bytes_per_step"] == 2 * 3 * (whole / 2)
