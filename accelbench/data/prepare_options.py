"""The options of `accelbench data prepare` and `data info`, declared once
(config/option_fields.py `option`: the commands' options are generated from them), and
`prepare_job`: every check of a prepare before anything is written, resolved into what
`shards.prepare` needs.

Hook for other sources: `corpus_and_tokenizer` is the one place that maps options to a corpus
(any iterable of documents with a description) and a tokenizer (any `Tokenizer`); `--genome`
maps to FASTA records (accelbench.data.genome_corpus) and the codon tokenizer of `--frame`,
and `shards.prepare` works unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from accelbench.config.errors import ConfigError, require_positive
from accelbench.config.option_fields import REQUIRED, argument, option
from accelbench.data.corpus import (
    Corpus,
    FileCorpus,
    StdlibDocstringCorpus,
    first_document,
    resolve_source,
)
from accelbench.data.defaults import (
    DEFAULT_CORPUS_CHUNK_CHARS,
    DEFAULT_CORPUS_SHARD_TOKENS,
    default_shards_dir,
)
from accelbench.data.fasta import check_nucleotide_text
from accelbench.data.genome_corpus import (
    GenomeCorpus,
    codon_tokenizer_name,
    is_codon_tokenizer,
    resolve_genomes,
    tokenizer_key,
)
from accelbench.data.shards import DEFAULT_CHUNK_CHARS, DEFAULT_SHARD_TOKENS, check_out_dir
from accelbench.data.tokenizer import Tokenizer, get_tokenizer, tokenizer_names

WORKERS_PER_CORE = 4  # more tokenizer processes than this only queue for the cores

SOURCE_HELP = ("default (offline stand-in for OpenWebText: this Python's stdlib docstrings; the "
               "default unless --genome), openwebtext (Hugging Face `datasets`), hf:NAME[@SPLIT] "
               "(any `datasets` dataset: a hub id or a local dataset folder), or a "
               ".txt/.jsonl/.parquet file or a folder.")
GENOME_HELP = ("Genomes as codon shards instead of text: default (the shipped SARS-CoV-2 "
               "genomes, the set `--data default` uses with the codon tokenizer), a FASTA or "
               "gzipped FASTA file, or a folder of them. One document per record, [SEP] "
               "between.")


@dataclass(frozen=True)
class PrepareOptions:
    """What `accelbench data prepare` is asked, as given."""

    source: str | None = option(None, SOURCE_HELP)
    genome: str | None = option(None, GENOME_HELP)
    frame: int | None = option(None, "Codon reading frame for --genome: 0 (default), 1 or 2.")
    out: Path | None = option(None, "Shard folder (required unless --source default, which has a "
                              "cache folder that `--data default` also uses).")
    shard_tokens: int | None = option(None, f"Tokens per shard (default "
                                      f"{DEFAULT_SHARD_TOKENS:,}; "
                                      f"{DEFAULT_CORPUS_SHARD_TOKENS:,} for --source default).")
    workers: int = option(1, "Tokenizer processes.")
    max_tokens: int | None = option(None, "Stop after this many tokens (default: the whole "
                                    "corpus).")
    tokenizer: str | None = option(None, f"One of: {', '.join(tokenizer_names())} (default "
                                   "gpt2; codon with --genome).")
    text_field: str = option("text", "JSON field or Parquet column holding the text.")
    progress: bool = option(True, "Show a progress bar.", "--progress/--no-progress")


@dataclass(frozen=True)
class InfoOptions:
    """What `accelbench data info` is asked."""

    directory: Path = argument(REQUIRED, "A folder made by `accelbench data prepare`.")
    verify: bool = option(True, "Check every shard's sha256 and token ids.", "--verify/--no-verify")
    json_out: bool = option(False, "Print the index as JSON.", "--json")


@dataclass(frozen=True)
class PrepareJob:
    """A checked prepare: the documents, their tokenizer, the folder and the shards' sizes."""

    corpus: Corpus
    tokenizer: Tokenizer
    out: Path
    shard_tokens: int
    max_tokens: int | None
    workers: int
    chunk_chars: int
    progress: bool


def corpus_and_tokenizer(source: str | None, tokenizer: str | None, text_field: str,
                         genome: str | None = None,
                         frame: int | None = None) -> tuple[Corpus, Tokenizer]:
    """Options to (documents, tokenizer): text sources, or genomes with a codon tokenizer."""
    if genome is None:
        if frame is not None:
            raise ConfigError("frame", "--frame applies to --genome only", "--genome PATH|default")
        return resolve_source(source or "default", text_field), get_tokenizer(tokenizer or "gpt2")
    if source is not None:
        raise ConfigError("source", "give --source or --genome, not both", "one of them")
    name = codon_tokenizer_name(0 if frame is None else frame)
    if tokenizer is not None and tokenizer != name:
        raise ConfigError("tokenizer", f"genomes are read by the codon tokenizer, not {tokenizer!r}"
                          " (choose the reading frame with --frame)", name)
    return resolve_genomes(genome), get_tokenizer(name)


def check_first_document(corpus: Corpus, tok: Tokenizer, given: str) -> None:
    """Local files are read up to their first document before anything is written: an empty
    file or a FASTA of headers only, a file that is not text, and English for the codon
    tokenizer are refused first (a Hugging Face dataset is not fetched twice for this)."""
    if not isinstance(corpus, FileCorpus | GenomeCorpus | StdlibDocstringCorpus):
        return
    field = "genome" if isinstance(corpus, GenomeCorpus) else "source"
    doc = first_document(corpus)
    if doc is None:
        what = "no sequence (an empty file, or headers only)" if field == "genome" else "no text"
        raise ConfigError(field, f"{given} holds {what}",
                          "FASTA records with sequence" if field == "genome" else
                          "files with text in them")
    if is_codon_tokenizer(tok) and field == "source":
        check_nucleotide_text(doc, f"the first document of {given}")


def check_workers(given: PrepareOptions) -> None:
    """Positive sizes, and no more tokenizer processes than the cores can run."""
    for name, value in (("shard-tokens", given.shard_tokens), ("max-tokens", given.max_tokens),
                        ("workers", given.workers)):
        if value is not None:
            require_positive(name, value)
    cores = os.cpu_count() or 1
    if given.workers > WORKERS_PER_CORE * cores:
        raise ConfigError("workers", f"{given.workers} tokenizer processes on {cores} cores",
                          f"1 to {WORKERS_PER_CORE * cores} ({WORKERS_PER_CORE} a core at most)")


def prepare_job(given: PrepareOptions) -> PrepareJob:
    """Every check of a prepare (ConfigError naming the first bad option), before anything is
    written; the built-in corpora take the settings `--data default` uses (its chunking, shard
    size and cache folder)."""
    check_workers(given)
    corpus, tok = corpus_and_tokenizer(given.source, given.tokenizer, given.text_field,
                                       given.genome, given.frame)
    chunk_chars, shard_tokens, out = DEFAULT_CHUNK_CHARS, given.shard_tokens, given.out
    builtin = (given.genome == "default" if given.genome is not None
               else given.source in (None, "default"))
    if builtin:
        chunk_chars = DEFAULT_CORPUS_CHUNK_CHARS
        shard_tokens = shard_tokens or DEFAULT_CORPUS_SHARD_TOKENS
        out = out or default_shards_dir(tokenizer_key(tok), given.max_tokens)
    if out is None:
        raise ConfigError("out", f"no output folder given for {given.genome or given.source!r}",
                          "--out DIR")
    check_out_dir(out)
    check_first_document(corpus, tok, given.genome or given.source
                         or "default (the built-in corpus)")
    return PrepareJob(corpus, tok, out, shard_tokens or DEFAULT_SHARD_TOKENS, given.max_tokens,
                      given.workers, chunk_chars, given.progress)
