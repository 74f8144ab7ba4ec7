"""How a layout's pipeline stages split a model's layers (even, uneven ends, interleaved)."""

from __future__ import annotations

from accelbench.config.layout import Layout


def stage_layer_counts(layout: Layout, n_layer: int) -> tuple[int, ...] | None:
    """Layers of each of the pp x vp stages in order, or None when they do not divide.

    Even: n_layer / (pp x vp) each. With pp_first / pp_last, the first and last pipeline ranks
    hold those counts and the ranks between share the rest equally (Megatron's
    decoder_first/last_pipeline_num_layers). Interleaved (vp > 1, pp >= 3): every rank's chunks
    hold middle / vp layers each, except the first chunk of the first rank and the last chunk
    of the last rank, which take the difference and may hold none (Llama 3 405B: 126 layers,
    pp 16, vp 8, 7 on the end ranks: the first chunk holds only the embedding, the last only
    the head). Stage s is chunk s // pp of rank s % pp.
    """
    n = layout.n_stages
    if not layout.uneven:
        return (n_layer // n,) * n if n_layer % n == 0 else None
    if layout.pp < 2 or (layout.vp > 1 and layout.pp < 3):
        return None
    ranks = _uneven_rank_counts(layout, n_layer)
    if ranks is None or layout.vp == 1:
        return ranks
    return _interleaved_counts(ranks, layout.vp)


def rank_layer_counts(layout: Layout, n_layer: int) -> tuple[int, ...] | None:
    """Layers each pipeline rank holds over its vp chunks (stage_layer_counts summed)."""
    counts = stage_layer_counts(layout, n_layer)
    if counts is None:
        return None
    return tuple(sum(counts[rank::layout.pp]) for rank in range(layout.pp))


def _uneven_rank_counts(layout: Layout, n_layer: int) -> tuple[int, ...] | None:
    """Layers per pipeline rank: pp_first / pp_last on the ends, the rest split equally."""
    pp = layout.pp
    ends = [layout.pp_first, layout.pp_last]
    middle = pp - sum(1 for e in ends if e)
    rest = n_layer - sum(ends)
    if rest < 0 or (middle == 0 and rest) or (middle and (rest % middle or rest == 0)):
        return None
    counts = [rest // middle if middle else 0] * pp
    if layout.pp_first:
        counts[0] = layout.pp_first
    if layout.pp_last:
        counts[-1] = layout.pp_last
    return tuple(counts)


def _interleaved_counts(ranks: tuple[int, ...], vp: int) -> tuple[int, ...] | None:
    """Per-rank counts as vp chunks each, in stage order: a middle rank's layers split equally,
    the first (last) rank's surplus or shortfall on its first (last) chunk, never below 0."""
    pp, middle = len(ranks), ranks[1]
    if middle % vp:
        return None
    chunk = middle // vp
    stages = [chunk] * (pp * vp)
    first, last = ranks[0] - chunk * (vp - 1), ranks[-1] - chunk * (vp - 1)
    if first < 0 or last < 0:
        return None
    stages[0], stages[-1] = first, last
    return tuple(stages)
