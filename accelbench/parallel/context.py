"""Context parallelism: each sequence split over the cp ranks of a data-parallel replica.

Load balance: a causal sequence is cut into 2 x cp chunks and cp rank i holds chunks i and
2cp-1-i, an early chunk (few keys to attend) and a late one (many), so every rank does the same
attention work (Megatron-LM's and torchtitan's layout). Each attention layer all-gathers the
keys and values of its cp group (all_gather_into_tensor; in the backward a reduce_scatter_tensor
sums each gathered piece's gradient back to the rank that holds it) and attends this rank's
queries to the keys before them: each of its two chunks in one attention call over the keys up
to its end, under a lower-right causal bias (on CUDA torch's causal_lower_right, with no mask
tensor, so flash attention stays usable; on a CPU no mask at all: the keys before the chunk
attended whole and its own square causally, two flash calls merged by their log-sum-exp,
models/prefix_attention.py).

Why an all-gather and not ring attention: the same bytes per rank ((cp-1)/cp of the sequence's
keys and values per pass), one collective per layer and pass (a small autograd function around
torch's own collectives), and any attention kernel that takes a causal bias; the price is that
autograd keeps every layer's gathered keys and values of the whole sequence for the backward
(docs/parallel.md, measured) and that nothing overlaps the gather with compute. The weights
are replicated over cp, so gradients are averaged over dp x cp ranks (one data-parallel group
of dp x cp: `placement`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import torch
import torch.distributed as dist

from accelbench.config.layout import Layout
from accelbench.models.gpt import GPT
from accelbench.parallel.dist import group_timeout


def placement(layout: Layout) -> Layout:
    """The layout weights and gradients are placed by: cp ranks folded into dp (they hold the
    same weights and average their gradients like data-parallel ranks)."""
    return replace(layout, dp=layout.dp * layout.cp, cp=1) if layout.cp > 1 else layout


@cache
def chunk_order(cp: int) -> tuple[tuple[int, int], ...]:
    """The two chunks (of 2 x cp) each cp rank holds: rank i has chunks i and 2cp-1-i."""
    return tuple((i, 2 * cp - 1 - i) for i in range(cp))


def local_positions(cp: int, rank: int, local_len: int) -> torch.Tensor:
    """Global positions of the local_len tokens cp rank `rank` holds (its two chunks)."""
    chunk = local_len // 2
    first, second = chunk_order(cp)[rank]
    return torch.cat([torch.arange(first * chunk, (first + 1) * chunk),
                      torch.arange(second * chunk, (second + 1) * chunk)])


class _GatherOverGroup(torch.autograd.Function):
    """all_gather_into_tensor forward, reduce_scatter_tensor (sum) backward: each gathered
    piece's gradient goes back to the rank that holds it, summed over the ranks that used it.
    (torch.distributed.nn.functional.all_gather's gloo backward scatters with global ranks and
    fails on a subgroup.)"""

    @staticmethod
    def forward(ctx, z: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
        ctx.group = group
        n = dist.get_world_size(group)
        out = z.new_empty((n * z.shape[0], *z.shape[1:]))
        dist.all_gather_into_tensor(out, z.contiguous(), group=group)
        return out.view(n, *z.shape)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        out = grad.new_empty(grad.shape[1:])
        dist.reduce_scatter_tensor(out, grad.reshape(-1, *grad.shape[2:]).contiguous(),
                                   group=ctx.group)
        return out, None


class ContextShard:
    """One rank's share of every sequence and its cp group's gather, for the model's seams."""

    def __init__(self, group: dist.ProcessGroup | None, cp: int, rank: int) -> None:
        self.group, self.cp, self.rank = group, cp, rank
        self._positions: dict[tuple[int, torch.device], torch.Tensor] = {}

    def positions(self, local_len: int, device: torch.device) -> torch.Tensor:
        """Global positions of this rank's tokens (cached per length and device)."""
        key = (local_len, device)
        if key not in self._positions:
            self._positions[key] = local_positions(self.cp, self.rank, local_len).to(device)
        return self._positions[key]

    def shard(self, t: torch.Tensor) -> torch.Tensor:
        """This rank's tokens of (batch, seq) ids or targets."""
        return t[:, self.positions(t.shape[1] // self.cp, t.device)]

    def spans(self, local_len: int,
              device: torch.device) -> tuple[tuple[int, int, int, object], ...]:
        """(query start, query end, keys seen, causal bias) of this rank's two chunks: chunk c
        of the sequence attends the first (c + 1) x chunk keys, causally aligned at its end,
        one attention call each (`_causal_bias`)."""
        chunk = local_len // 2
        spans = []
        for i, c in enumerate(chunk_order(self.cp)[self.rank]):
            keys = (c + 1) * chunk
            spans.append((i * chunk, (i + 1) * chunk, keys,
                          self._causal_bias(chunk, keys, device)))
        return tuple(spans)

    def _causal_bias(self, queries: int, keys: int, device: torch.device) -> object:
        """A lower-right causal bias: torch's CausalBias, which CUDA's flash and
        memory-efficient attention take with no mask tensor; None on a CPU, where SDPA would
        materialize it and keep it for the backward (quadratic in the sequence), and the model
        attends without a mask instead (models/prefix_attention.py). Imported here: its module
        imports Dynamo, about a second of every process's start."""
        if device.type == "cpu":
            return None
        from torch.nn.attention.bias import causal_lower_right
        return causal_lower_right(queries, keys)

    def gather(self, z: torch.Tensor) -> torch.Tensor:
        """(batch, heads, local_len, d) keys or values -> the whole sequence's, in order."""
        parts = _GatherOverGroup.apply(z, self.group)  # (cp, batch, heads, local_len, d)
        chunk = z.shape[2] // 2
        ordered: list[torch.Tensor | None] = [None] * (2 * self.cp)
        for rank, (first, second) in enumerate(chunk_order(self.cp)):
            ordered[first] = parts[rank][:, :, :chunk]
            ordered[second] = parts[rank][:, :, chunk:]
        return torch.cat(ordered, dim=2)  # type: ignore[arg-type]


def cp_groups(layout: Layout) -> list[list[int]]:
    """The cp groups: tp innermost, then cp, then dp, pipeline stages outermost (Megatron's
    order, the (pp, dp x cp, tp) mesh of `placement`), so group (p, d, t) holds ranks
    p x stage + (d x cp + c) x tp + t for c < cp, stage = dp x cp x tp ranks."""
    cp, tp = layout.cp, layout.tp
    stage = layout.dp * cp * tp
    return [[p * stage + (d * cp + c) * tp + t for c in range(cp)]
            for p in range(layout.pp) for d in range(layout.dp) for t in range(tp)]


def context_shard(layout: Layout) -> ContextShard:
    """This rank's ContextShard, its cp group made on every rank in the same order as
    torch.distributed requires."""
    timeout = group_timeout()
    me, mine = dist.get_rank(), None
    for members in cp_groups(layout):
        group = dist.new_group(members, timeout=timeout)
        if me in members:
            mine = group
    return ContextShard(mine, layout.cp, (me // layout.tp) % layout.cp)


def set_context(model: GPT, shard: ContextShard | None) -> None:
    """Point the model's seams (its input and every attention layer) at `shard`."""
    model.context = shard
    for block in model.h:
        block.attn.context = shard
