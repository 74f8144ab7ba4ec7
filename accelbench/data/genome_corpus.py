"""Genomes as a corpus for token shards: one document per FASTA record, files in a fixed order.

The shard writer puts the tokenizer's eot id after every document; for the codon tokenizer that is
[SEP], so shards hold `codons(record 1) [SEP] codons(record 2) [SEP] ...`. Records with no
sequence are skipped (they would only add a lone [SEP]). Each record is tokenized on its own, so
the reading frame counts from the first base of every record.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from accelbench.config.errors import ConfigError
from accelbench.data.fasta import builtin_genomes, iter_fasta
from accelbench.data.tokenizer import Tokenizer

FASTA_SUFFIXES = (".fasta", ".fa", ".fna", ".ffn", ".fasta.gz", ".fa.gz", ".fna.gz", ".ffn.gz")
DEFAULT_GENOMES = "default"


@dataclass(frozen=True)
class GenomeCorpus:
    """FASTA files (plain or gzipped) read in the given order, one document per record."""

    paths: tuple[Path, ...]
    label: str = "fasta"

    @property
    def description(self) -> str:
        """Kind and absolute paths: stored in the shard index, so other files are not mixed in."""
        if self.label == "builtin":
            return "genomes:builtin " + ",".join(p.name for p in self.paths)
        return "genomes:" + ",".join(str(p.resolve()) for p in self.paths)

    def documents(self) -> Iterator[str]:
        """Each non-empty record's sequence, file after file, record after record."""
        for path in self.paths:
            for record in iter_fasta(path, skip_empty=True):
                yield record.sequence


def builtin_genome_corpus() -> GenomeCorpus:
    """The shipped SARS-CoV-2 reference and 10 simulated genomes (11 documents)."""
    return GenomeCorpus(tuple(builtin_genomes()), label="builtin")


def _fasta_files(folder: Path) -> list[Path]:
    """FASTA files below a folder, sorted by path (the order decides the shard contents)."""
    found = sorted(p for p in folder.rglob("*")
                   if p.is_file() and p.name.lower().endswith(FASTA_SUFFIXES))
    if not found:
        raise ConfigError("genome", f"folder {folder} holds no FASTA file",
                          ", ".join(FASTA_SUFFIXES))
    return found


def resolve_genomes(value: str) -> GenomeCorpus:
    """A --genome value: 'default' (shipped genomes), a FASTA file (gz or not) or a folder."""
    if value == DEFAULT_GENOMES:
        return builtin_genome_corpus()
    path = Path(value).expanduser()
    if path.is_dir():
        return GenomeCorpus(tuple(_fasta_files(path)))
    if not path.is_file():
        raise ConfigError("genome", f"no such file: {path}",
                          "default, a FASTA or gzipped FASTA file, or a folder of them")
    return GenomeCorpus((path,))


def is_codon_tokenizer(tokenizer: Tokenizer | str) -> bool:
    """True for GenSLM's codon tokenizers (any reading frame)."""
    name = tokenizer if isinstance(tokenizer, str) else tokenizer.name
    return name.startswith("codon")


def codon_tokenizer_name(frame: int) -> str:
    """Registered name of the codon tokenizer for a reading frame; a bad frame is a ConfigError."""
    if frame not in (0, 1, 2):
        raise ConfigError("frame", f"unknown reading frame {frame!r}", "0, 1, 2")
    return "codon" if frame == 0 else f"codon-frame{frame}"


def tokenizer_key(tokenizer: Tokenizer) -> str:
    """A name that tells reading frames apart (all codon tokenizers are named 'codon')."""
    frame = getattr(tokenizer, "frame", 0)
    return codon_tokenizer_name(frame) if is_codon_tokenizer(tokenizer) else tokenizer.name

