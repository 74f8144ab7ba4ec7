"""Streaming FASTA reader: plain or gzipped files, any size, read in fixed-size byte blocks.

Rules (what a record is):
- A record starts at a line beginning with '>'; the header is the rest of that line, with the
  line end (LF or CRLF) and surrounding whitespace removed.
- Sequence lines are joined; spaces, tabs, CR and LF are dropped. Letters keep their case (the
  codon tokenizer upper-cases), and every IUPAC code is kept: A C G T U, R Y S W K M B D H V N,
  plus '-' (gap) and '*' (stop) and '.', in either case. Any other byte is an error.
- A record with no sequence (a header followed by another header or the end of the file) is
  yielded with an empty sequence, or skipped when `skip_empty=True`.
- Blank lines anywhere are ignored; sequence data before the first header is an error.
- Gzip is detected by its magic bytes (1f 8b), not by the file name. A UTF-8 byte-order mark at
  the start is ignored.

Memory: `iter_fasta` holds one record at a time (a SARS-CoV-2 genome is 30 kB), whatever the file
size. `iter_fasta_chunks` never holds more than one block and one chunk, so a single record larger
than memory (a chromosome) can be read too.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from accelbench.config.errors import ConfigError

GZIP_MAGIC = b"\x1f\x8b"
BLOCK_BYTES = 1 << 20
MAX_HEADER_BYTES = 1 << 20
IUPAC_BYTES = b"ACGTURYSWKMBDHVN-*." + b"acgturyswkmbdhvn"
_WHITESPACE = b" \t\r\n\v\f"
_ASSETS = Path(__file__).resolve().parents[1] / "assets" / "genomes"


class FastaError(ConfigError):
    """A file that is not valid FASTA; a ConfigError (field `genome`, the file named in the
    problem) so the CLI prints it on one line."""

    def __init__(self, source: str, problem: str, allowed: str | None = None) -> None:
        super().__init__("genome", f"{source}: {problem}", allowed)


@dataclass(frozen=True)
class FastaRecord:
    """One FASTA record: header without '>' and the whole sequence, case as in the file."""

    header: str
    sequence: str

    @property
    def id(self) -> str:
        """The first word of the header (the accession, by convention)."""
        return self.header.split(maxsplit=1)[0] if self.header.strip() else ""


@dataclass(frozen=True)
class FastaChunk:
    """A piece of one record's sequence: `start_nt` is its offset inside the record."""

    record_index: int
    header: str
    start_nt: int
    sequence: str


_NUCLEOTIDE_TEXT = frozenset((IUPAC_BYTES + _WHITESPACE).decode("ascii"))
TEXT_CHECK_CHARS = 1 << 20


def check_nucleotide_text(text: str, where: str) -> None:
    """Refuse text that is not nucleotides (English, code) for the codon tokenizer, which would
    turn it into unknown codons; the first TEXT_CHECK_CHARS characters are looked at."""
    head = text[:TEXT_CHECK_CHARS]
    bad = next((i for i, ch in enumerate(head) if ch not in _NUCLEOTIDE_TEXT), None)
    if bad is not None:
        raise ConfigError("tokenizer", f"the codon tokenizer reads nucleotides, but {where} has "
                          f"{head[bad]!r} at character {bad}", "gpt2 for text; codon for "
                          "nucleotide text (IUPAC codes ACGTURYSWKMBDHVN, '-', '*', '.')")


def builtin_genomes() -> list[Path]:
    """The shipped default genome set: the SARS-CoV-2 reference and 10 simulated genomes."""
    return [_ASSETS / "NC_045512.2.fasta", _ASSETS / "sars-cov-2_simulated_10.fasta"]


def open_maybe_gzip(path: str | Path) -> BinaryIO:
    """Open a file for binary reading, decompressing when its first bytes are gzip's magic."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("genome", f"no such file: {path}", "a FASTA or gzipped FASTA file")
    with path.open("rb") as probe:
        magic = probe.read(2)
    if magic == GZIP_MAGIC:
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


class _Parser:
    """Turns byte blocks into ('header', text) and ('seq', bytes) events; keeps little state."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.at_line_start = True
        self.header: bytearray | None = None  # bytes of a header line not yet complete
        self.seen_header = False

    def feed(self, block: bytes) -> Iterator[tuple[str, bytes]]:
        """Events for one block; a header or line may continue into the next block."""
        pos = 0
        while pos < len(block):
            if self.header is not None:
                pos = yield from self._header_part(block, pos)
            elif self.at_line_start and block[pos] == 0x3E:  # '>'
                self.header, self.seen_header = bytearray(), True
                pos += 1
            else:
                pos = yield from self._sequence_part(block, pos)

    def _header_part(self, block: bytes, pos: int) -> Iterator[tuple[str, bytes]]:
        end = block.find(b"\n", pos)
        assert self.header is not None
        self.header += block[pos : len(block) if end < 0 else end]
        if len(self.header) > MAX_HEADER_BYTES:
            raise FastaError(self.source, f"header longer than {MAX_HEADER_BYTES} bytes")
        if end < 0:
            return len(block)
        yield "header", bytes(self.header)
        self.header, self.at_line_start = None, True
        return end + 1

    def _sequence_part(self, block: bytes, pos: int) -> Iterator[tuple[str, bytes]]:
        end = block.find(b"\n>", pos)
        stop = len(block) if end < 0 else end + 1
        data = block[pos:stop].translate(None, _WHITESPACE)
        self.at_line_start = block[stop - 1] == 0x0A
        if data:
            self._check(data)
            yield "seq", data
        return stop

    def _check(self, data: bytes) -> None:
        if not self.seen_header:
            raise FastaError(self.source, "sequence data before the first '>' header",
                             "FASTA: '>' header lines followed by sequence lines")
        bad = data.translate(None, IUPAC_BYTES)
        if bad:
            raise FastaError(self.source, f"character {chr(bad[0])!r} is not a nucleotide code",
                             "IUPAC codes ACGTURYSWKMBDHVN, '-', '*', '.' in either case")

    def finish(self) -> Iterator[tuple[str, bytes]]:
        """A header on the last line without a line end still counts."""
        if self.header is not None:
            yield "header", bytes(self.header)
            self.header = None


def _events(path: str | Path, block_bytes: int) -> Iterator[tuple[str, bytes]]:
    if block_bytes <= 0:
        raise ConfigError("block_bytes", f"must be positive, got {block_bytes}", "> 0")
    parser = _Parser(str(path))
    with open_maybe_gzip(path) as stream:
        first = stream.read(max(block_bytes, 3)).removeprefix(b"\xef\xbb\xbf")  # UTF-8 BOM
        yield from parser.feed(first)
        while block := stream.read(block_bytes):
            yield from parser.feed(block)
    yield from parser.finish()


def _header_text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").strip()


def iter_fasta(
    path: str | Path, *, skip_empty: bool = False, block_bytes: int = BLOCK_BYTES
) -> Iterator[FastaRecord]:
    """Records one at a time; memory is one record plus one block, whatever the file size."""
    header: str | None = None
    parts: list[bytes] = []
    for kind, data in _events(path, block_bytes):
        if kind == "seq":
            parts.append(data)
            continue
        if header is not None and (parts or not skip_empty):
            yield FastaRecord(header, b"".join(parts).decode("ascii"))
        header, parts = _header_text(data), []
    if header is not None and (parts or not skip_empty):
        yield FastaRecord(header, b"".join(parts).decode("ascii"))


def read_fasta(path: str | Path, *, skip_empty: bool = False) -> list[FastaRecord]:
    """All records of a small file in a list (use iter_fasta for large ones)."""
    return list(iter_fasta(path, skip_empty=skip_empty))


def iter_fasta_chunks(
    path: str | Path, chunk_nt: int, *, block_bytes: int = BLOCK_BYTES
) -> Iterator[FastaChunk]:
    """Each record cut into pieces of `chunk_nt` letters (the last piece of a record shorter).

    Memory stays at one block plus one chunk even for a single record larger than memory. Empty
    records yield no chunk. A `chunk_nt` divisible by 3 keeps codons whole across chunks.
    """
    if chunk_nt <= 0:
        raise ConfigError("chunk_nt", f"must be positive, got {chunk_nt}", "> 0")
    index, header, start, pending = -1, "", 0, bytearray()
    for kind, data in _events(path, block_bytes):
        if kind == "header":
            if pending:
                yield FastaChunk(index, header, start, pending.decode("ascii"))
            index, header, start, pending = index + 1, _header_text(data), 0, bytearray()
            continue
        pending += data
        full = len(pending) // chunk_nt * chunk_nt
        for offset in range(0, full, chunk_nt):
            yield FastaChunk(index, header, start, pending[offset : offset + chunk_nt].decode())
            start += chunk_nt
        del pending[:full]
    if pending:
        yield FastaChunk(index, header, start, pending.decode("ascii"))
