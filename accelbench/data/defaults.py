"""Where prepared shards live by default, and the offline default corpus prepared on demand.

The default corpus depends on the tokenizer: GenSLM's codon tokenizers read the shipped SARS-CoV-2
genomes (one document per FASTA record); every other tokenizer reads this Python's stdlib text.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from accelbench.data.corpus import Corpus, StdlibDocstringCorpus
from accelbench.data.genome_corpus import builtin_genome_corpus, is_codon_tokenizer, tokenizer_key
from accelbench.data.shard_format import TokenShards, open_shards
from accelbench.data.shards import prepare
from accelbench.data.tokenizer import Tokenizer, get_tokenizer

# None = the whole built-in corpus (about 0.6 M GPT-2 tokens on Python 3.11, prepared in ~10 s).
DEFAULT_CORPUS_MAX_TOKENS: int | None = None
DEFAULT_CORPUS_SHARD_TOKENS = 1 << 20
DEFAULT_CORPUS_CHUNK_CHARS = 1 << 16  # small work units: a small max_tokens reads little
# Commands started together (two sweeps, a study's planner beside a run) all need the default
# corpus: one prepares it and the others wait for it, then open it, rather than fail. Its
# preparation takes seconds; a holder that dies drops its lock at once.
DEFAULT_CORPUS_WAIT_S = 300.0


def data_home() -> Path:
    """$ACCELBENCH_DATA_HOME, else $XDG_CACHE_HOME/accelbench/data, else ~/.cache/..."""
    if os.environ.get("ACCELBENCH_DATA_HOME"):
        return Path(os.environ["ACCELBENCH_DATA_HOME"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "accelbench" / "data"


def default_shards_dir(tokenizer_name: str = "gpt2", max_tokens: int | None = None) -> Path:
    """Folder for the default corpus; named by tokenizer, size and Python version (its text)."""
    size = "all" if max_tokens is None else str(max_tokens)
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    return data_home() / f"default-{tokenizer_name}-{size}-{python}"


def default_corpus(tokenizer: Tokenizer) -> Corpus:
    """The built-in corpus for a tokenizer: shipped genomes for codon*, else the stdlib text."""
    return builtin_genome_corpus() if is_codon_tokenizer(tokenizer) else StdlibDocstringCorpus()


def ensure_default_shards(
    tokenizer: Tokenizer | None = None,
    *,
    max_tokens: int | None = DEFAULT_CORPUS_MAX_TOKENS,
    out_dir: Path | str | None = None,
    workers: int = 1,
    progress: bool = False,
) -> TokenShards:
    """Prepare the built-in corpus if it is not there yet (resuming if cut short), then open it;
    where another process is preparing it, wait for that one (DEFAULT_CORPUS_WAIT_S).

    The corpus follows the tokenizer (`default_corpus`); the folder is named by the tokenizer and
    its reading frame, so each frame's codon shards have a folder of their own.
    """
    tokenizer = tokenizer or get_tokenizer("gpt2")
    out = (Path(out_dir) if out_dir is not None
           else default_shards_dir(tokenizer_key(tokenizer), max_tokens))
    prepare(
        default_corpus(tokenizer), tokenizer, out, shard_tokens=DEFAULT_CORPUS_SHARD_TOKENS,
        max_tokens=max_tokens, workers=workers, chunk_chars=DEFAULT_CORPUS_CHUNK_CHARS,
        progress=progress, wait_s=DEFAULT_CORPUS_WAIT_S,
    )
    return open_shards(out, tokenizer)
