"""`accelbench data`: turn a corpus into token shards, and show what a shard folder holds.

Hook for other sources: `_corpus_and_tokenizer` is the one place that maps options to a corpus
(any iterable of documents with a description) and a tokenizer (any `Tokenizer`); `--genome`
maps to FASTA records (accelbench.data.genome_corpus) and the codon tokenizer of `--frame`, and
`prepare` below works unchanged.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer
from rich.table import Table

from accelbench.cli.common import console
from accelbench.cli.common import out as result_out  # `out` is an option name here
from accelbench.config.errors import ConfigError, require_positive
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
from accelbench.data.shard_format import open_shards
from accelbench.data.shards import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_SHARD_TOKENS,
    check_out_dir,
    prepare,
)
from accelbench.data.tokenizer import Tokenizer, get_tokenizer, tokenizer_names
from accelbench.report.table import add_plain_row, plain_table

WORKERS_PER_CORE = 4  # more tokenizer processes than this only queue for the cores

data_app = typer.Typer(
    help="Corpora to token shards (uint16 memmaps + index), and what a shard folder holds.",
    no_args_is_help=True,
)


def _corpus_and_tokenizer(source: str | None, tokenizer: str | None, text_field: str,
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


def _check_first_document(corpus: Corpus, tok: Tokenizer, given: str) -> None:
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


@data_app.command("prepare")
def prepare_cmd(
    source: str | None = typer.Option(
        None, "--source",
        help="default (offline stand-in for OpenWebText: this Python's stdlib docstrings; the "
        "default unless --genome), openwebtext (Hugging Face `datasets`), hf:NAME[@SPLIT] "
        "(any `datasets` dataset: a hub id or a local dataset folder), or a "
        ".txt/.jsonl/.parquet file or a folder.",
    ),
    genome: str | None = typer.Option(
        None, "--genome", help="Genomes as codon shards instead of text: default (the shipped "
        "SARS-CoV-2 genomes, the set `--data default` uses with the codon tokenizer), a FASTA or "
        "gzipped FASTA file, or a folder of them. One document per record, [SEP] between."),
    frame: int | None = typer.Option(
        None, "--frame", help="Codon reading frame for --genome: 0 (default), 1 or 2."),
    out: Path | None = typer.Option(
        None, "--out", help="Shard folder (required unless --source default, which has a "
        "cache folder that `--data default` also uses)."),
    shard_tokens: int | None = typer.Option(
        None, "--shard-tokens", help=f"Tokens per shard (default {DEFAULT_SHARD_TOKENS:,}; "
        f"{DEFAULT_CORPUS_SHARD_TOKENS:,} for --source default)."),
    workers: int = typer.Option(1, "--workers", help="Tokenizer processes."),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", help="Stop after this many tokens (default: the whole corpus)."),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help=f"One of: {', '.join(tokenizer_names())} (default gpt2; "
        "codon with --genome)."),
    text_field: str = typer.Option(
        "text", "--text-field", help="JSON field or Parquet column holding the text."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Tokenize a corpus into shards; rerun the same command to resume after a kill."""
    for name, value in (("shard-tokens", shard_tokens), ("max-tokens", max_tokens),
                        ("workers", workers)):
        if value is not None:
            require_positive(name, value)
    cores = os.cpu_count() or 1
    if workers > WORKERS_PER_CORE * cores:
        raise ConfigError("workers", f"{workers} tokenizer processes on {cores} cores",
                          f"1 to {WORKERS_PER_CORE * cores} ({WORKERS_PER_CORE} a core at most)")
    corpus, tok = _corpus_and_tokenizer(source, tokenizer, text_field, genome, frame)
    chunk_chars = DEFAULT_CHUNK_CHARS
    builtin = genome == "default" if genome is not None else source in (None, "default")
    if builtin:
        chunk_chars = DEFAULT_CORPUS_CHUNK_CHARS  # the same settings as `--data default`
        shard_tokens = shard_tokens or DEFAULT_CORPUS_SHARD_TOKENS
        out = out or default_shards_dir(tokenizer_key(tok), max_tokens)
    if out is None:
        raise ConfigError("out", f"no output folder given for {genome or source!r}", "--out DIR")
    check_out_dir(out)
    _check_first_document(corpus, tok, genome or source or "default (the built-in corpus)")
    index = prepare(
        corpus, tok, out, shard_tokens=shard_tokens or DEFAULT_SHARD_TOKENS,
        max_tokens=max_tokens, workers=workers, chunk_chars=chunk_chars, progress=progress,
    )
    console.print(f"{index['total_tokens']:,} tokens in {len(index['shards'])} shards "
                  f"({index['dtype']}, {index['tokenizer']['name']}) in {out}", markup=False)


def _summary_table(directory: Path, index: dict) -> Table:
    """Key facts of an index as a two-column table."""
    table = plain_table(f"token shards in {directory}", show_header=False)
    rows = {
        "source": index.get("source"),
        "tokenizer": index["tokenizer"]["name"],
        "identity": index["tokenizer"]["identity"],
        "vocab / eot": f"{index['tokenizer']['vocab_size']} / {index['tokenizer']['eot_id']}",
        "dtype": index["dtype"],
        "shards": f"{len(index['shards'])} of up to {index['shard_tokens']:,} tokens",
        "tokens": f"{index['total_tokens']:,}",
        "complete": "yes" if index["complete"] else "no (rerun prepare to resume)",
    }
    for key, value in rows.items():
        add_plain_row(table, key, value)
    return table


@data_app.command("info")
def info_cmd(
    directory: Path = typer.Argument(..., help="A folder made by `accelbench data prepare`."),
    verify: bool = typer.Option(True, "--verify/--no-verify",
                                help="Check every shard's sha256 and token ids."),
    json_out: bool = typer.Option(False, "--json", help="Print the index as JSON."),
) -> None:
    """Validate a shard folder, then show its index (bad shards: one line and exit code 2,
    before any listing)."""
    index = open_shards(directory, verify_hashes=verify).index
    if json_out:
        print(json.dumps(index, indent=1))
    else:
        result_out.print(_summary_table(directory, index))  # the listing on stdout
    console.print(f"ok: {len(index['shards'])} shards present"
                  + (", sha256 and token ids verified" if verify else ", sizes checked"))


def register(app: typer.Typer) -> None:
    """Add the `data` command group."""
    app.add_typer(data_app, name="data")
