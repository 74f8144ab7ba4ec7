"""`accelbench genslm`'s options: every training option (bench/train/train_options.py), GenSLM's
defaults and its own two, turned into a checked codon-token TrainSpec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench.bench.train.train_options import TrainOptions, build_spec
from accelbench.config.option_fields import option as _opt

if TYPE_CHECKING:  # the spec imports torch: not needed to list the options
    from accelbench.bench.train.spec import TrainSpec


@dataclass(frozen=True)
class GenslmOptions(TrainOptions):
    """`accelbench genslm`: every training option, GenSLM's defaults, and its own two."""

    frame: int = _opt(0, "Codon reading frame of the data: 0, 1 or 2.")
    longest_seq: bool = _opt(
        False, "Find the longest sequence that fits (doubling from --seq, then bisection; trial "
        "on an accelerator, memory estimate on a CPU), then measure it.", "--longest-seq")


# genslm's own defaults over TrainOptions' (also those of a study's experiments)
GENSLM_DEFAULTS = {"model": "genslm-25m", "data": "default", "seq": "2048"}


def build_genslm_spec(options: GenslmOptions) -> TrainSpec:
    """A GenSLM sweep's spec: codon tokens in the options' reading frame; with --longest-seq,
    a spec the search cannot take is refused here, before anything runs."""
    from accelbench.bench.train.search import search_cells
    from accelbench.data.genome_corpus import codon_tokenizer_name

    spec = build_spec(options, benchmark="genslm", tokenizer=codon_tokenizer_name(options.frame))
    if options.longest_seq:
        search_cells(spec)
    return spec
