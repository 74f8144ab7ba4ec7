"""Context parallelism's attention in one process: each cp rank's two query chunks, attended
to the whole sequence's keys chunk by chunk under a lower-right causal bias, give exactly the
rows of ordinary causal attention at those positions (no mask tensor is made)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from accelbench.config.layout import Layout
from accelbench.models.gpt import _causal_attention
from accelbench.parallel.context import ContextShard, cp_groups


@pytest.mark.parametrize("cp, kv_heads", [(2, 4), (4, 4), (4, 2)])
def test_each_ranks_chunks_equal_causal_attention_at_their_positions(cp, kv_heads):
    torch.manual_seed(cp + kv_heads)
    b, h, seq, d = 2, 4, 16 * cp, 8
    q = torch.randn(b, h, seq, d, dtype=torch.float64)
    k, v = (torch.randn(b, kv_heads, seq, d, dtype=torch.float64) for _ in range(2))
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv_heads != h)
    local = seq // cp
    seen = []
    for rank in range(cp):
        shard = ContextShard(None, cp, rank)
        positions = shard.positions(local, q.device)
        spans = shard.spans(local, q.device, q.dtype)
        assert [end - start for start, end, _, _ in spans] == [local // 2] * 2
        y = _causal_attention(q[:, :, positions], k, v, spans)
        torch.testing.assert_close(y, full[:, :, positions])
        seen += positions.tolist()
    assert sorted(seen) == list(range(seq))  # every position on exactly one rank


def test_the_first_chunk_sees_one_chunk_and_the_last_the_whole_sequence():
    shard = ContextShard(None, 2, 0)  # rank 0 of 2: chunks 0 and 3 of 4
    spans = shard.spans(8, torch.device("cpu"), torch.float32)
    assert [s[:3] for s in spans] == [(0, 4, 4), (4, 8, 16)]
    first, last = spans[0][3], spans[1][3]  # additive masks off CUDA, made once
    assert first.shape == (4, 4) and last.shape == (4, 16)
    assert torch.equal(last == 0, torch.ones(4, 16, dtype=torch.bool).tril(12))
    assert shard.spans(8, torch.device("cpu"), torch.float32)[1][3] is last


def test_on_cuda_the_bias_is_torchs_lower_right_causal_bias_with_no_tensor():
    from torch.nn.attention.bias import CausalBias, CausalVariant

    bias = ContextShard(None, 2, 1)._causal_bias(4, 12, torch.device("cuda"), torch.bfloat16)
    assert isinstance(bias, CausalBias) and bias.variant == CausalVariant.LOWER_RIGHT
    assert (bias.seq_len_q, bias.seq_len_kv) == (4, 12)


@pytest.mark.parametrize("dp, cp, tp, pp", [(2, 2, 1, 1), (1, 2, 2, 2), (2, 2, 2, 2), (1, 4, 1, 3)])
def test_cp_groups_are_the_placed_meshs_dp_runs(dp, cp, tp, pp):
    """Each cp group is `cp` neighbouring ranks of one replica on the (pp, dp x cp, tp) mesh that
    `placement` builds, at one pipeline stage and tensor rank; context_shard's rank is the
    place in it."""
    layout = Layout(dp=dp, cp=cp, tp=tp, pp=pp)
    mesh = torch.arange(layout.world_size).reshape(pp, dp * cp, tp)
    want = [mesh[p, d * cp:(d + 1) * cp, t].tolist()
            for p in range(pp) for d in range(dp) for t in range(tp)]
    assert cp_groups(layout) == want
    for members in cp_groups(layout):
        assert [(r // tp) % cp for r in members] == list(range(cp))
