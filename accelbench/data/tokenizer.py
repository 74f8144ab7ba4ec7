"""Tokenizers: the protocol every tokenizer meets, and the real GPT-2 byte-level BPE, offline.

The `Tokenizer` protocol is what the shard writer, the loaders and the shard index rely on, so a
GPT-2 BPE tokenizer and a codon tokenizer (accelbench/data/codon.py) are interchangeable there.
"""

from __future__ import annotations

import importlib.resources
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from accelbench.config.errors import ConfigError
from accelbench.data.codon import FRAMES, CodonTokenizer
from accelbench.data.hashing import file_sha256

# sha256 of the original GPT-2 files (the values tiktoken itself checks for "gpt2");
# source: shared/data/README.md, copied into accelbench/assets/gpt2/PROVENANCE.md.
GPT2_FILE_SHA256 = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
GPT2_VOCAB_SIZE = 50257
GPT2_EOT_ID = 50256
GPT2_EOT_TEXT = "<|endoftext|>"


@runtime_checkable
class Tokenizer(Protocol):
    """What a tokenizer must offer to be used by the shard writer, the index and the loaders.

    - `name`: short registry name ("gpt2", "codon").
    - `identity`: a string naming the tokenizer *and* the exact files or tables behind it (for
      example their sha256); it is stored in every shard index, and shards are refused when the
      identity asked for differs, so two tokenizers that give different ids must differ here.
    - `vocab_size`: number of ids (every id is < vocab_size); decides the shard dtype.
    - `eot_id`: the id written after every document in a shard.
    - `encode(text)`: one document to ids; must not add the eot id itself.
    - `encode_batch(texts)`: same as `[encode(t) for t in texts]`, possibly faster.
    - `decode(ids)`: ids back to text.
    A tokenizer must pickle cheaply (it is sent once to each worker process of `prepare`).
    """

    @property
    def name(self) -> str: ...

    @property
    def identity(self) -> str: ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def eot_id(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def gpt2_asset_dir() -> Path:
    """Folder of the GPT-2 files shipped as package data (accelbench/assets/gpt2)."""
    return Path(str(importlib.resources.files("accelbench").joinpath("assets", "gpt2")))


def check_gpt2_files(asset_dir: Path) -> None:
    """Refuse GPT-2 files that are missing or whose sha256 differs from the published one."""
    for file_name, expected in GPT2_FILE_SHA256.items():
        path = asset_dir / file_name
        if not path.is_file():
            raise ConfigError("tokenizer", f"GPT-2 file {path} is missing")
        actual = file_sha256(path)
        if actual != expected:
            raise ConfigError(
                "tokenizer",
                f"GPT-2 file {path} has sha256 {actual}, not the published {expected} "
                "(corrupt or a different file)",
            )


class Gpt2Tokenizer:
    """GPT-2's byte-level BPE (vocab 50257, eot 50256) driven by tiktoken from the shipped files.

    Text is encoded as ordinary text: a literal "<|endoftext|>" inside a document is split into
    normal tokens (as Hugging Face's ByteLevelBPETokenizer does), so only the shard writer places
    eot ids, between documents.
    """

    def __init__(self, asset_dir: Path | str | None = None) -> None:
        self._asset_dir = Path(asset_dir) if asset_dir is not None else gpt2_asset_dir()
        check_gpt2_files(self._asset_dir)
        self._encoding = None
        self._lock = threading.Lock()

    name = "gpt2"
    vocab_size = GPT2_VOCAB_SIZE
    eot_id = GPT2_EOT_ID

    @property
    def identity(self) -> str:
        """Names the tokenizer and the sha256 of both files it was built from."""
        hashes = " ".join(f"{name}:sha256:{h}" for name, h in sorted(GPT2_FILE_SHA256.items()))
        return f"gpt2-bpe vocab={GPT2_VOCAB_SIZE} eot={GPT2_EOT_ID} {hashes}"

    def _enc(self):  # -> tiktoken.Encoding
        """Build the tiktoken encoding on first use (about 0.3 s), once per process."""
        if self._encoding is None:
            with self._lock:
                if self._encoding is None:
                    self._encoding = _build_tiktoken(self._asset_dir)
        return self._encoding

    def encode(self, text: str) -> list[int]:
        """One document to ids, without an eot id."""
        return self._enc().encode_ordinary(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Many documents to ids (tiktoken's threaded batch path)."""
        return self._enc().encode_ordinary_batch(list(texts))

    def decode(self, ids: Sequence[int]) -> str:
        """Ids back to text; bytes that are not valid UTF-8 become U+FFFD."""
        return self._enc().decode(list(ids))

    def __getstate__(self) -> dict:
        """Pickle only the folder: each process rebuilds (and re-checks) from the files."""
        return {"asset_dir": str(self._asset_dir)}

    def __setstate__(self, state: dict) -> None:
        """Rebuild lazily in the receiving process."""
        self.__init__(state["asset_dir"])


def _build_tiktoken(asset_dir: Path):  # -> tiktoken.Encoding
    """tiktoken Encoding from the data-gym files, as tiktoken builds its own "gpt2"."""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext.openai_public import r50k_pat_str  # GPT-2's pre-tokenizer pattern

    ranks = data_gym_to_mergeable_bpe_ranks(
        str(asset_dir / "vocab.bpe"),
        str(asset_dir / "encoder.json"),
        vocab_bpe_hash=GPT2_FILE_SHA256["vocab.bpe"],
        encoder_json_hash=GPT2_FILE_SHA256["encoder.json"],
    )
    return tiktoken.Encoding(
        "gpt2",
        pat_str=r50k_pat_str,
        mergeable_ranks=ranks,
        special_tokens={GPT2_EOT_TEXT: GPT2_EOT_ID},
        explicit_n_vocab=GPT2_VOCAB_SIZE,
    )


_FACTORIES: dict[str, Callable[[], Tokenizer]] = {"gpt2": Gpt2Tokenizer}
for _frame in FRAMES:  # GenSLM's codon tokenizer, one name per reading frame
    _FACTORIES["codon" if _frame == 0 else f"codon-frame{_frame}"] = (
        lambda f=_frame: CodonTokenizer(frame=f))


def register_tokenizer(name: str, factory: Callable[[], Tokenizer]) -> None:
    """Make a tokenizer available by name (GPT-2 and the codon frames are built in)."""
    _FACTORIES[name] = factory


def tokenizer_names() -> list[str]:
    """Names accepted by get_tokenizer."""
    return sorted(_FACTORIES)


def get_tokenizer(name: str) -> Tokenizer:
    """Build a registered tokenizer by name; unknown names are a ConfigError listing the known."""
    if name not in _FACTORIES:
        raise ConfigError("tokenizer", f"unknown tokenizer {name!r}", ", ".join(tokenizer_names()))
    return _FACTORIES[name]()
