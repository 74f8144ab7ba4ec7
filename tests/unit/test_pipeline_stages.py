"""Pipeline stages hold the layers stage_layer_counts gives them (even or uneven), and the
per-rank accounting of parameters and collectives counts the same layers."""

from __future__ import annotations

import pytest

from accelbench.analytics.params import block_params
from accelbench.config.layer_split import stage_layer_counts
from accelbench.config.layout_parse import parse_layout
from accelbench.config.presets import get_preset
from accelbench.parallel.pipeline import stage_layers
from accelbench.parallel.rank_params import local_param_count, rank_layers

TINY = get_preset("gpt2-tiny").with_changes(n_layer=4)


@pytest.mark.parametrize("text, n_layer", [
    ("pp=3,pp_first=1,pp_last=1", 4), ("pp=16,pp_first=7,pp_last=7", 126), ("pp=2,vp=2", 8),
    ("pp=4,pp_last=2", 11), ("pp=2,pp_first=1", 4),
])
def test_stage_layers_follow_the_counts(text: str, n_layer: int) -> None:
    """Stages are contiguous, cover every block once, and hold the layout's counts."""
    lay = parse_layout(text)
    ranges = [stage_layers(lay, n_layer, s) for s in range(lay.n_stages)]
    assert [len(r) for r in ranges] == list(stage_layer_counts(lay, n_layer))
    assert [i for r in ranges for i in r] == list(range(n_layer))


def test_stage_layers_refuse_a_split_that_does_not_divide() -> None:
    with pytest.raises(ValueError, match="does not split"):
        stage_layers(parse_layout("pp=4,pp_first=3"), 10, 0)


def test_rank_layers_and_parameters_of_uneven_stages() -> None:
    """pp=2, pp_first=1 on 4 layers: rank 0 holds 1 block and the embeddings, rank 1 three
    blocks, the final norm and the head copy; interleaved ranks sum their chunks."""
    lay = parse_layout("pp=2,pp_first=1")
    assert [rank_layers(TINY, lay, r) for r in (0, 1)] == [1, 3]
    h, v = TINY.d_model, TINY.padded_vocab  # the rows the embedding and head hold
    assert local_param_count(TINY, lay, 0) == block_params(TINY) + v * h + TINY.n_positions * h
    assert local_param_count(TINY, lay, 1) == 3 * block_params(TINY) + 2 * h + v * h
    assert rank_layers(TINY.with_changes(n_layer=8), parse_layout("pp=2,vp=2"), 1) == 4
