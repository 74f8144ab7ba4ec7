"""Context parallelism's attention in one process: each cp rank's two query chunks, attended
to the whole sequence's keys chunk by chunk under a lower-right causal bias (on a CPU with no
mask: models/prefix_attention.py), give exactly the rows of ordinary causal attention at those
positions (no mask tensor is made)."""

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
        spans = shard.spans(local, q.device)
        assert [end - start for start, end, _, _ in spans] == [local // 2] * 2
        y = _causal_attention(q[:, :, positions], k, v, spans)
        torch.testing.assert_close(y, full[:, :, positions])
        seen += positions.tolist()
    assert sorted(seen) == list(range(seq))  # every position on exactly one rank


def test_the_first_chunk_sees_one_chunk_and_the_last_the_whole_sequence():
    shard = ContextShard(None, 2, 0)  # rank 0 of 2: chunks 0 and 3 of 4
    spans = shard.spans(8, torch.device("cpu"))
    assert [s[:3] for s in spans] == [(0, 4, 4), (4, 8, 16)]
    assert [s[3] for s in spans] == [None, None]  # on a CPU no mask tensor


def test_on_a_cpu_the_attention_takes_no_mask_and_no_padding(monkeypatch):
    """Every call of the chunks' attention is the flash kernel's with no mask: the keys
    before the chunk whole, its own square causally (a mask would be kept for the backward,
    quadratic in the sequence)."""
    from accelbench.models import prefix_attention

    calls = []
    flash = prefix_attention._FLASH

    def spy(q, k, v, dropout, causal, **kwargs):
        calls.append((q.shape[2], k.shape[2], causal, kwargs.get("attn_mask")))
        return flash(q, k, v, dropout, causal, **kwargs)

    monkeypatch.setattr(prefix_attention, "_FLASH", spy)
    monkeypatch.setattr(F, "scaled_dot_product_attention", None)  # never the mask path
    q, k, v = (torch.randn(1, 2, n, 4) for n in (8, 16, 16))
    _causal_attention(q, k, v, ContextShard(None, 2, 0).spans(8, q.device))
    assert calls == [(4, 4, True, None), (4, 4, True, None), (4, 12, False, None)]


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_the_maskless_chunks_gradients_equal_causal_attentions(kv_heads):
    """The merged blocks' backward (each flash backward with the merged output and log-sum-exp)
    gives the gradients of ordinary causal attention at the chunk's rows."""
    torch.manual_seed(kv_heads)
    q = torch.randn(2, 4, 32, 8, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(2, kv_heads, 32, 8, dtype=torch.float64, requires_grad=True)
            for _ in range(2))
    rows = ContextShard(None, 2, 1).positions(16, q.device)  # chunks 1 and 2 of 4
    spans = ContextShard(None, 2, 1).spans(16, q.device)
    weights = torch.randn(2, 4, 16, 8, dtype=torch.float64)
    (_causal_attention(q[:, :, rows], k, v, spans) * weights).sum().backward()
    ours = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv_heads != 4)
    (full[:, :, rows] * weights).sum().backward()
    for got, t in zip(ours, (q, k, v), strict=True):
        torch.testing.assert_close(got, t.grad)


def test_on_cuda_the_bias_is_torchs_lower_right_causal_bias_with_no_tensor():
    from torch.nn.attention.bias import CausalBias, CausalVariant

    bias = ContextShard(None, 2, 1)._causal_bias(4, 12, torch.device("cuda"))
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
