"""Bytes per step that this implementation sends for mixture-of-experts layouts, by hand
(tests/dist/test_comm_bytes_moe.py checks the same accounting against the profiler on gloo).

moe-tiny (vocab 1024): d_model 128, 2 MoE layers of 8 experts (top 2, SwiGLU, width 128) and
one shared expert; the attention and norms of a layer A + 2h, router 8h, shared expert 3h^2.
"""

from __future__ import annotations

import pytest

from accelbench.analytics.moe_cost import all_to_all_bytes_per_layer
from accelbench.bench.train import cell_metrics as metrics
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.layout import Layout
from accelbench.config.presets import get_preset
from accelbench.parallel.collectives import (
    busiest_rank_comm_bytes,
    comm_bytes_per_step,
    comm_calls_per_step,
)
from accelbench.parallel.ideal_comm import ideal_comm_bytes_per_step
from accelbench.parallel.rank_params import local_param_split, rank_moe_layers

MOE = get_preset("moe-tiny").with_changes(n_positions=64, vocab_size=1024)
H, V = 128, 1024
ATTN = H * (H + 2 * 64) + H * H  # fused q, k, v (2 kv heads of 32) and the output: 49152
EXPERT = 3 * H * H  # one SwiGLU expert of width 128 (the shared one too): 49152
MOE_DENSE = ATTN + 2 * H + 8 * H + EXPERT  # attention, norms, router, shared expert: 99584
DENSE = 2 * MOE_DENSE + 2 * V * H + H  # + embedding, untied head, final norm: 461440
ROWS = 2 * 32 * 2  # tokens (micro-batch 2 x sequence 32) x top 2
ROW_FP32 = 4 * ROWS * H  # one all-to-all's routed rows in fp32: 65536 bytes
COUNTS = 8 * 8  # E int64
M = 2  # micro-batches


def _bytes(layout: Layout, dtype: str = "fp32", **kw) -> dict[str, float]:
    return comm_bytes_per_step(MOE, layout, 32, 2, M, dtype, **kw)


def test_a_rank_holds_its_experts_and_the_moe_layer_whole_on_every_tensor_rank():
    assert DENSE == 461440
    assert local_param_split(MOE, Layout(dp=2, ep=2)) == (DENSE, 2 * 4 * EXPERT)
    assert local_param_split(MOE, Layout(dp=4)) == (DENSE, 2 * 8 * EXPERT)
    # tp = 2: only the attention's matrices split; norms, router, shared and routed experts whole
    tp_dense = 2 * (ATTN / 2 + 2 * H + 8 * H + EXPERT) + 2 * V * H + H
    assert local_param_split(MOE, Layout(tp=2)) == (tp_dense, 2 * 8 * EXPERT)
    assert local_param_split(MOE, Layout(dp=2, pp=2, ep=2), 0) == (MOE_DENSE + V * H, 4 * EXPERT)
    assert local_param_split(MOE, Layout(dp=2, pp=2, ep=2), 1) == (MOE_DENSE + V * H + H,
                                                                   4 * EXPERT)


def test_ep2_at_dp2_zero_0_1_3_experts_reduced_over_a_group_of_one():
    """dp = ep = 2: the experts' group is one rank (no bytes leave it; FSDP2 issues nothing)."""
    psi = 4 * DENSE  # fp32 dense gradient bytes
    assert _bytes(Layout(dp=2, ep=2))["dp_bytes_per_step"] == psi  # 2(n-1)/n psi, n = 2
    assert _bytes(Layout(dp=2, ep=2, zero=1))["dp_bytes_per_step"] == psi + psi / 2
    assert _bytes(Layout(dp=2, ep=2, zero=3))["dp_bytes_per_step"] == 3 * M * psi / 2
    expert_calls = [c for c in comm_calls_per_step(MOE, Layout(dp=2, ep=2, zero=3), 32, 2, M,
                                                   "fp32") if c.kind == "dp" and c.group_size == 1]
    assert expert_calls == []
    zero0 = comm_calls_per_step(MOE, Layout(dp=2, ep=2), 32, 2, M, "fp32")
    assert [(c.buffer_bytes, c.group_size) for c in zero0 if c.kind == "dp"] == [
        (psi, 2), (4 * 2 * 4 * EXPERT, 1)]  # the runtime's all-reduce over one rank still runs


def test_dp4_ep2_dense_over_dp_experts_over_their_pairs():
    psi, experts = 4 * DENSE, 4 * 2 * 4 * EXPERT
    assert _bytes(Layout(dp=4, ep=2))["dp_bytes_per_step"] == 1.5 * psi + experts
    zero1 = 1.5 * psi + experts + 0.75 * psi + 0.5 * experts  # + each part's broadcast
    assert _bytes(Layout(dp=4, ep=2, zero=1))["dp_bytes_per_step"] == zero1
    zero3 = (2 * M + M) * (0.75 * psi + 0.5 * experts)  # gathers fwd + bwd, reduce-scatters
    assert _bytes(Layout(dp=4, ep=2, zero=3))["dp_bytes_per_step"] == pytest.approx(zero3)
    assert _bytes(Layout(dp=4))["dp_bytes_per_step"] == 1.5 * (psi + 2 * experts)  # ep 1


def test_all_to_all_counts_and_rows_under_uniform_routing():
    """Per MoE layer and micro-batch: the counts (E int64) once, the rows 4 times (fp32 dispatch
    and its gradient, combine and its gradient in the compute dtype), half of them remote."""
    per_step = 2 * M  # layers x micro-batches
    fp32 = _bytes(Layout(dp=2, ep=2))["ep_bytes_per_step"]
    assert fp32 == per_step * (COUNTS + 4 * ROW_FP32) / 2
    bf16 = _bytes(Layout(dp=2, ep=2), "bf16")["ep_bytes_per_step"]
    assert bf16 == per_step * (COUNTS + 2 * ROW_FP32 + 2 * ROW_FP32 / 2) / 2
    full = _bytes(Layout(dp=2, ep=2), recompute="full")["ep_bytes_per_step"]
    assert full == per_step * (2 * COUNTS + 6 * ROW_FP32) / 2  # the forward's again
    assert _bytes(Layout(dp=4))["ep_bytes_per_step"] == 0
    capped = comm_bytes_per_step(MOE.with_changes(capacity_factor=0.5), Layout(dp=2, ep=2), 32,
                                 2, M, "fp32")["ep_bytes_per_step"]
    assert capped == per_step * (COUNTS + 4 * ROW_FP32 / 2) / 2  # 8 x ceil(0.5 x 128 / 8) rows
    sp = comm_bytes_per_step(MOE, Layout(dp=2, tp=2, ep=2, sp=True), 32, 2, M, "fp32")
    assert sp["ep_bytes_per_step"] == per_step * (COUNTS + 4 * ROW_FP32 / 2) / 2  # its shard


def test_ideal_volume_adds_the_planners_all_to_all():
    ideal = ideal_comm_bytes_per_step(MOE, Layout(dp=2, ep=2), 32, 2, M, "fp32", 4 * DENSE)
    assert ideal["ep_bytes_per_step"] == 2 * M * 4 * ROW_FP32 / 2
    assert ideal["ep_bytes_per_step"] == 2 * M * all_to_all_bytes_per_layer(MOE, 64, 2, "fp32")
    assert ideal["comm_bytes_per_step"] == sum(v for k, v in ideal.items()
                                               if k != "comm_bytes_per_step")


def test_pipeline_ranks_count_their_own_moe_layers():
    """moe_first_dense = 1 over 4 layers, pp = 2: rank 0 holds a dense and an MoE layer, rank 1
    two MoE layers, so rank 1 sends twice the all-to-all bytes and reduces twice the experts."""
    cfg = MOE.with_changes(n_layer=4, moe_first_dense=1)
    lay = Layout(dp=2, pp=2, ep=2)
    assert rank_moe_layers(cfg, lay, 0) == [1] and rank_moe_layers(cfg, lay, 1) == [2, 3]
    first = comm_bytes_per_step(cfg, lay, 32, 2, M, "fp32", pp_rank=0)
    last = comm_bytes_per_step(cfg, lay, 32, 2, M, "fp32", pp_rank=1)
    assert first["ep_bytes_per_step"] == M * (COUNTS + 4 * ROW_FP32) / 2
    assert last["ep_bytes_per_step"] == 2 * first["ep_bytes_per_step"]
    dense_block = ATTN + 2 * H + 3 * H * MOE.ffn_dim
    assert local_param_split(cfg, lay, 0) == (dense_block + MOE_DENSE + V * H, 4 * EXPERT)
    rank, busiest = busiest_rank_comm_bytes(cfg, lay, 32, 2, M, "fp32")
    # rank 0's dense MLP (ffn 384) outweighs rank 1's second MoE layer's dense part and rows
    assert first["comm_bytes_per_step"] > last["comm_bytes_per_step"]
    assert rank == 0 and busiest == first


def test_tensor_parallel_moe_layers_split_only_their_attention():
    """An MoE layer's MLP is whole on every tensor rank: 1 collective per direction (the
    attention's), not 2; under sp the MoE gradients are summed over tp once per step."""
    act = 4 * 2 * 32 * H
    tp = comm_calls_per_step(MOE, Layout(tp=2), 32, 2, M, "fp32")
    assert [(c.op, c.calls) for c in tp] == [("all_reduce", 2 * M), ("all_reduce", 2 * M)]
    sp = comm_calls_per_step(MOE, Layout(tp=2, sp=True), 32, 2, M, "fp32")
    assert sum(c.calls for c in sp if c.op == "all_gather") == 2 * 2 * M + 2 * M  # + edges
    moe_grads = 4 * 2 * (8 * H + EXPERT + 8 * EXPERT)  # router, shared, 8 routed, 2 layers
    assert [c.buffer_bytes for c in sp if c.op == "all_reduce"] == [moe_grads]
    assert {c.buffer_bytes for c in sp if c.op != "all_reduce"} == {act}
    sp3 = comm_calls_per_step(MOE, Layout(dp=2, tp=2, ep=2, sp=True, zero=3), 32, 2, M, "fp32")
    hook = [c for c in sp3 if c.kind == "tp" and c.op == "all_reduce"]
    shard = 4 * 2 * (8 * H + EXPERT) / 2 + 4 * 2 * 4 * EXPERT  # MoE unit / dp, experts / 1
    assert [(c.buffer_bytes, c.calls) for c in hook] == [(shard, M)]


def test_the_record_keeps_both_volumes_with_experts_reduced_over_their_group():
    """The training record's two dicts (metrics._comm) for dp = 4, ep = 2: the ideal reduces
    dense gradients over dp and each rank's experts (half of them) over the ep pairs, so at
    zero 0 both volumes equal 1.5 psi + the experts' bytes; the ideal's all-to-all is the
    planner's fp32 rows (4 per layer and micro-batch), this implementation's adds the counts."""
    spec = TrainSpec(MOE, seq_lens=(32,), micro_batches=(2,), gas=(M,), dtypes=("fp32",),
                     device="cpu")
    cell = TrainCell(seq_len=32, micro_batch=2, gas=M, dtype="fp32", recompute="none")
    record = metrics._comm(spec, cell, Layout(dp=4, ep=2), "gloo")
    sent = record["comm_bytes_per_step_per_rank"]
    ideal = record["comm_bytes_per_step_ideal_per_rank"]
    dp = 1.5 * 4 * DENSE + 4 * 2 * 4 * EXPERT
    assert sent["dp_bytes_per_step"] == ideal["dp_bytes_per_step"] == dp
    assert ideal["ep_bytes_per_step"] == 2 * M * 4 * ROW_FP32 / 2
    assert sent["ep_bytes_per_step"] == ideal["ep_bytes_per_step"] + 2 * M * COUNTS / 2
