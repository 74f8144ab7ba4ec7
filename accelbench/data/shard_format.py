"""The token-shard format on disk, and opening a prepared folder read-only.

Layout of a shard folder:
  index.json        schema_version, tokenizer {name, identity, vocab_size, eot_id}, dtype,
                    shard_tokens, chunk_chars, max_tokens, source, complete, total_tokens, and
                    shards: [{file, tokens, sha256, resume: {chunk, offset}}]
  shard_00000.bin   raw little-endian token ids, no header; documents end with the eot id.

`accelbench.data.shards.prepare` writes such a folder; `open_shards` validates and maps it.
numpy is imported where arrays are made, so importing this module (the CLI does) does not load it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.config.errors import ConfigError
from accelbench.data.hashing import file_sha256
from accelbench.data.tokenizer import Tokenizer

if TYPE_CHECKING:
    import numpy as np

SCHEMA_VERSION = 1
INDEX_NAME = "index.json"


def shard_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (GPT-2: 50257, codons: 69), else uint32; little-endian."""
    import numpy as np

    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def shard_name(number: int) -> str:
    """File name of shard `number`."""
    return f"shard_{number:05d}.bin"


class TokenShards:
    """Prepared shards opened read-only as numpy memmaps, after the index was validated."""

    def __init__(self, directory: Path, index: dict) -> None:
        import numpy as np

        self.directory = directory
        self.index = index
        dtype = np.dtype(index["dtype"]).newbyteorder("<")
        self.arrays = [
            np.memmap(directory / shard["file"], dtype=dtype, mode="r", shape=(shard["tokens"],))
            for shard in index["shards"] if shard["tokens"]
        ]

    @property
    def total_tokens(self) -> int:
        """Tokens over all shards."""
        return int(self.index["total_tokens"])

    def tokens(self) -> np.ndarray:
        """All tokens in one array (a copy: for small corpora and tests)."""
        import numpy as np

        if not self.arrays:
            return np.empty(0, dtype=np.dtype(self.index["dtype"]))
        return np.concatenate(self.arrays)


def read_index(directory: Path) -> dict:
    """Parse index.json, refusing a missing file, bad JSON or another schema version."""
    path = directory / INDEX_NAME
    if directory.exists() and not directory.is_dir():
        raise ConfigError("data", f"{directory} is a file, not a shard folder",
                          "a folder made by `accelbench data prepare --out DIR`")
    if not directory.exists():
        raise ConfigError("data", f"no such folder: {directory}",
                          "a folder made by `accelbench data prepare`")
    if not path.is_file():
        raise ConfigError(
            "data", f"{directory} has no {INDEX_NAME}",
            f"a folder made by `accelbench data prepare --out {directory}`",
        )
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError("data", f"{path} is not valid JSON ({err})") from err
    if not isinstance(index, dict) or index.get("schema_version") != SCHEMA_VERSION:
        found = index.get("schema_version") if isinstance(index, dict) else None
        raise ConfigError(
            "data", f"{path} has schema version {found!r}", f"{SCHEMA_VERSION} (prepare again)"
        )
    return index


def _check_ids(path: Path, dtype: np.dtype, tokens: int, vocab_size: int) -> None:
    """Every token id of a shard is below the vocabulary size (else an embedding lookup fails
    halfway through a run); read in blocks, so a large shard needs no large buffer."""
    import numpy as np

    ids = np.memmap(path, dtype=dtype, mode="r", shape=(tokens,))
    block = 1 << 24
    for start in range(0, tokens, block):
        top = int(ids[start:start + block].max())
        if top >= vocab_size:
            raise ConfigError(
                "data", f"shard {path} holds token id {top}, outside the tokenizer's "
                f"{vocab_size} ids (corrupt, or made with another tokenizer; prepare again)",
                f"ids 0 to {vocab_size - 1}")


def _check_shard(directory: Path, shard: dict, itemsize: int, verify_hashes: bool) -> None:
    """One shard file exists, has the size the index says, and (optionally) its sha256."""
    path = directory / shard["file"]
    if not path.is_file():
        raise ConfigError("data", f"shard {shard['file']} listed in {directory} is missing")
    expected_bytes = shard["tokens"] * itemsize
    actual_bytes = path.stat().st_size
    if actual_bytes != expected_bytes:
        raise ConfigError(
            "data", f"shard {path} has {actual_bytes} bytes, the index says {expected_bytes} "
            "(truncated or corrupt; prepare again)",
        )
    if verify_hashes:
        actual = file_sha256(path)
        if actual != shard["sha256"]:
            raise ConfigError(
                "data", f"shard {path} has sha256 {actual}, the index says {shard['sha256']} "
                "(corrupt; prepare again)",
            )


def open_shards(
    directory: Path | str,
    tokenizer: Tokenizer | str | None = None,
    *,
    verify_hashes: bool = True,
) -> TokenShards:
    """Validate a shard folder and open it; `tokenizer` (object or identity) must match if given.

    verify_hashes=True also checks every token id is below the vocabulary size;
    verify_hashes=False checks only presence and sizes (for very large corpora).
    """
    import numpy as np

    directory = Path(directory)
    index = read_index(directory)
    if not index.get("complete"):
        raise ConfigError(
            "data", f"preparation of {directory} did not finish ({len(index['shards'])} shards "
            "so far)", "rerun `accelbench data prepare` with the same options to resume",
        )
    if tokenizer is not None:
        wanted = tokenizer if isinstance(tokenizer, str) else tokenizer.identity
        made_with = index["tokenizer"]["identity"]
        if wanted != made_with:
            raise ConfigError(
                "tokenizer", f"shards in {directory} were made with tokenizer {made_with!r}, "
                f"but {wanted!r} was asked for", "shards prepared with the same tokenizer",
            )
    dtype = np.dtype(index["dtype"]).newbyteorder("<")
    for shard in index["shards"]:
        _check_shard(directory, shard, dtype.itemsize, verify_hashes)
        if verify_hashes and shard["tokens"]:
            _check_ids(directory / shard["file"], dtype, shard["tokens"],
                       int(index["tokenizer"]["vocab_size"]))
    return TokenShards(directory, index)
