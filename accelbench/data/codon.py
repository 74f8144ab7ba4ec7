"""GenSLM's codon tokenizer: a nucleotide sequence read as 3-letter words, ids from GenSLM's file.

Ids come from GenSLM's own word-level vocabulary (accelbench/assets/genslm/
codon_wordlevel_69vocab.json): [UNK]=0, [CLS]=1, [SEP]=2, [PAD]=3, [MASK]=4, then the 64 codons in
GenSLM's order (GGC=5 ... TAG=68). The rules, applied in this order:
1. Whitespace is removed (so GenSLM's space-separated codon text encodes like the plain sequence).
2. Letters are upper-cased (GenSLM's own pipeline turned lower-case codons into [UNK]) and U is read
   as T (RNA written as RNA).
3. The first `frame` bases (0, 1 or 2) are skipped: the reading frame.
4. The rest is cut into codons; an incomplete trailing codon (1 or 2 bases) is dropped.
5. A codon with any base other than A, C, G, T (N, the other IUPAC ambiguity codes, gaps, any
   other character) becomes [UNK]: one ambiguous base hides which codon it was.
Decoding gives codons back as upper-case DNA; [UNK] and [MASK] decode to "NNN" (an unknown codon,
keeping the length and frame), [PAD], [CLS], [SEP] and any other special token to nothing.
[SEP] is the end-of-document id that the shard writer puts after every genome (`eot_id`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.config.errors import ConfigError
from accelbench.data.hashing import file_sha256

if TYPE_CHECKING:
    import numpy as np

GENSLM_VOCAB_PATH = Path(__file__).resolve().parents[1] / "assets" / "genslm" / (
    "codon_wordlevel_69vocab.json"
)
CODONS = tuple("".join(c) for c in product("ACGT", repeat=3))  # index = 16*a + 4*b + c
SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")
UNKNOWN_CODON_TEXT = "NNN"
_BAD = 4  # base code of anything that is not A, C, G, T/U
_WHITESPACE = b" \t\r\n\v\f"
FRAMES = (0, 1, 2)


@cache
def _base_code() -> np.ndarray:
    """Byte -> base code: 0-3 for A, C, G, T/U (either case), _BAD for anything else. Made on
    first use, like every array here, so naming a tokenizer (the CLI's options) imports no numpy."""
    import numpy as np

    table = np.full(256, _BAD, dtype=np.int64)
    for code, letters in enumerate(("Aa", "Cc", "Gg", "TtUu")):
        for letter in letters:
            table[ord(letter)] = code
    return table


def load_codon_vocab(path: Path) -> dict[str, int]:
    """Token -> id from a Hugging Face WordLevel tokenizer file; checks codons and specials."""
    try:
        vocab = json.loads(Path(path).read_text())["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            "tokenizer.vocab", f"cannot read a WordLevel vocab from {path}: {exc}"
        ) from exc
    missing = [t for t in CODONS + SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise ConfigError("tokenizer.vocab", f"{path} lacks {', '.join(missing[:5])}",
                          "GenSLM's codon_wordlevel_69vocab.json or a file with the same tokens")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise ConfigError("tokenizer.vocab", f"{path}: ids are not 0..{len(vocab) - 1}")
    return {str(token): int(i) for token, i in vocab.items()}


class CodonTokenizer:
    """Codons of one reading frame to GenSLM ids and back; meets the `Tokenizer` protocol."""

    name = "codon"

    def __init__(self, frame: int = 0, vocab_path: Path | str | None = None) -> None:
        import numpy as np

        if frame not in FRAMES:
            raise ConfigError("tokenizer.frame", f"unknown reading frame {frame!r}", "0, 1, 2")
        self.frame = frame
        self.vocab_path = Path(vocab_path) if vocab_path is not None else GENSLM_VOCAB_PATH
        self.vocab = load_codon_vocab(self.vocab_path)
        self.vocab_sha256 = file_sha256(self.vocab_path)
        self.unk_id, self.cls_id = self.vocab["[UNK]"], self.vocab["[CLS]"]
        self.sep_id, self.pad_id = self.vocab["[SEP]"], self.vocab["[PAD]"]
        self.mask_id = self.vocab["[MASK]"]
        # Codon index (16a + 4b + c), plus one slot for "has an ambiguous base", to id.
        self._id_of_code = np.array([self.vocab[c] for c in CODONS] + [self.unk_id], np.int64)
        self._text_of_id = [""] * len(self.vocab)
        for token, i in self.vocab.items():
            self._text_of_id[i] = token if token in CODONS else ""
        for i in (self.unk_id, self.mask_id):
            self._text_of_id[i] = UNKNOWN_CODON_TEXT

    @property
    def vocab_size(self) -> int:
        """Number of ids (69 for GenSLM's file)."""
        return len(self.vocab)

    @property
    def eot_id(self) -> int:
        """[SEP] separates documents (genomes) in shards."""
        return self.sep_id

    @property
    def identity(self) -> str:
        """Names the tokenizer, its frame and the sha256 of the vocabulary file behind the ids."""
        return (f"genslm-codon vocab={self.vocab_size} eot=[SEP]:{self.sep_id} frame={self.frame} "
                f"{self.vocab_path.name}:sha256:{self.vocab_sha256}")

    def _base_codes(self, text: str) -> np.ndarray:
        """Per-base codes 0-3 (A, C, G, T/U) or 4 (anything else) of one frame, whole codons."""
        import numpy as np

        raw = text.encode("ascii", errors="replace").translate(None, _WHITESPACE)
        usable = max(len(raw) - self.frame, 0) // 3 * 3
        data = np.frombuffer(raw, dtype=np.uint8)[self.frame : self.frame + usable]
        return _base_code()[data].reshape(-1, 3)

    def encode_array(self, text: str) -> np.ndarray:
        """Ids as a numpy int64 array (what `encode` returns as a list)."""
        codes = self._base_codes(text)
        index = codes[:, 0] * 16 + codes[:, 1] * 4 + codes[:, 2]
        index[(codes == _BAD).any(axis=1)] = len(CODONS)
        return self._id_of_code[index]

    def encode(self, text: str) -> list[int]:
        """One sequence to codon ids, without [SEP] (the shard writer adds it between genomes)."""
        return self.encode_array(text).tolist()

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Many sequences to ids; the same as encoding each one."""
        return [self.encode(t) for t in texts]

    def codons(self, text: str) -> list[str]:
        """The normalised codon strings behind `encode` (upper case, U as T, whole codons)."""
        clean = "".join(text.split()).upper().replace("U", "T")[self.frame :]
        return [clean[i : i + 3] for i in range(0, len(clean) - 2, 3)]

    def decode(self, ids: Sequence[int]) -> str:
        """Ids back to DNA: codons as they are, [UNK]/[MASK] as NNN, other specials as nothing."""
        table = self._text_of_id
        bad = [i for i in ids if not 0 <= i < len(table)]
        if bad:
            raise ValueError(f"id {bad[0]} is outside the codon vocabulary 0..{len(table) - 1}")
        return "".join(table[i] for i in ids)
