"""FASTA reader: the shipped genomes, and the edge cases real files have."""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

import pytest

from accelbench.config.errors import ConfigError
from accelbench.data.fasta import (
    FastaError,
    builtin_genomes,
    iter_fasta,
    iter_fasta_chunks,
    read_fasta,
)

REFERENCE_START = "ATTAAAGGTTTATACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTC"


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _pairs(path: Path, **kw) -> list[tuple[str, str]]:
    return [(r.header, r.sequence) for r in iter_fasta(path, **kw)]


def _naive_parse(path: Path) -> list[tuple[str, str]]:
    """A second, line-based reader for files known to be clean."""
    records: list[tuple[str, list[str]]] = []
    for line in path.read_text().splitlines():
        if line.startswith(">"):
            records.append((line[1:].strip(), []))
        elif line.strip():
            records[-1][1].append(line.strip())
    return [(h, "".join(parts)) for h, parts in records]


def test_reference_genome() -> None:
    ref_path, sim_path = builtin_genomes()
    [ref] = read_fasta(ref_path)
    assert ref.id == "NC_045512.2"
    assert ref.header.endswith("isolate Wuhan-Hu-1, complete genome")
    assert len(ref.sequence) == 29903
    assert ref.sequence.startswith(REFERENCE_START)
    assert _pairs(ref_path) == _naive_parse(ref_path)
    sims = read_fasta(sim_path)
    assert [r.header for r in sims] == [f"seq{i}" for i in range(1, 11)]
    assert all(len(r.sequence) == 29903 for r in sims)
    assert _pairs(sim_path) == _naive_parse(sim_path)


def test_wrapping_does_not_matter(tmp_path: Path) -> None:
    [ref] = read_fasta(builtin_genomes()[0])
    seq = ref.sequence
    for width in (1, 60, 80, len(seq)):
        lines = "\n".join(seq[i : i + width] for i in range(0, len(seq), width))
        path = _write(tmp_path, f"w{width}.fa", f">{ref.header}\n{lines}\n".encode())
        assert _pairs(path) == [(ref.header, seq)]


def test_crlf_lower_case_and_iupac(tmp_path: Path) -> None:
    data = b">a first\r\nacgtn\r\nRYKMSWBDHVN-*\r\n\r\n>b\r\nAC GT\tU\r\n"
    path = _write(tmp_path, "crlf.fa", data)
    assert _pairs(path) == [("a first", "acgtnRYKMSWBDHVN-*"), ("b", "ACGTU")]


def test_empty_records(tmp_path: Path) -> None:
    path = _write(tmp_path, "empty.fa", b">a\n>b desc\nACGT\n>c\n\n>d")
    assert _pairs(path) == [("a", ""), ("b desc", "ACGT"), ("c", ""), ("d", "")]
    assert _pairs(path, skip_empty=True) == [("b desc", "ACGT")]
    assert _pairs(_write(tmp_path, "nothing.fa", b"")) == []
    assert _pairs(_write(tmp_path, "blank.fa", b"\n\n")) == []


def test_block_boundaries_anywhere(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf>x one\r\nAC\r\nGT\r\n>y\r\n>z\nTTTT\nGG\n"
    path = _write(tmp_path, "edges.fa", data)
    expected = [("x one", "ACGT"), ("y", ""), ("z", "TTTTGG")]
    for block in (1, 2, 3, 5, 7, 1 << 20):
        assert _pairs(path, block_bytes=block) == expected


def test_gzip_detected_by_magic_bytes(tmp_path: Path) -> None:
    raw = builtin_genomes()[1].read_bytes()
    gz = _write(tmp_path, "genomes.fasta", gzip.compress(raw))  # no .gz suffix on purpose
    plain_named_gz = _write(tmp_path, "plain.fa.gz", raw)
    expected = _pairs(builtin_genomes()[1])
    assert _pairs(gz) == expected
    assert _pairs(plain_named_gz) == expected
    assert _pairs(gz, block_bytes=4099) == expected


def test_bad_input_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(FastaError, match="before the first '>' header"):
        list(iter_fasta(_write(tmp_path, "nohead.fa", b"ACGT\n>a\nAC\n")))
    with pytest.raises(FastaError, match="'1' is not a nucleotide code"):
        list(iter_fasta(_write(tmp_path, "digit.fa", b">a\nACG1T\n")))
    with pytest.raises(ConfigError, match="no such file"):
        list(iter_fasta(tmp_path / "missing.fa"))
    assert issubclass(FastaError, ConfigError)


def test_chunks_rebuild_records(tmp_path: Path) -> None:
    records = read_fasta(builtin_genomes()[1])
    chunks = list(iter_fasta_chunks(builtin_genomes()[1], 999, block_bytes=4096))
    assert len(chunks) == 10 * 30  # 29903 = 29 * 999 + 932
    for i, record in enumerate(records):
        mine = [c for c in chunks if c.record_index == i]
        assert [c.start_nt for c in mine] == list(range(0, 29903, 999))
        assert {c.header for c in mine} == {record.header}
        assert "".join(c.sequence for c in mine) == record.sequence
    path = _write(tmp_path, "e.fa", b">a\n>b\nACGTA\n")
    assert [(c.record_index, c.sequence) for c in iter_fasta_chunks(path, 3)] == [
        (1, "ACG"), (1, "TA")]


def test_huge_record_in_bounded_memory(tmp_path: Path) -> None:
    seq_bytes = 4 << 20
    path = _write(tmp_path, "big.fa", b">big\n" + b"ACGT" * (seq_bytes // 4) + b"\n")
    tracemalloc.start()
    total = 0
    for chunk in iter_fasta_chunks(path, 3000, block_bytes=64 << 10):
        total += len(chunk.sequence)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert total == seq_bytes
    assert peak < seq_bytes // 8  # blocks of 64 KiB, never the 4 MiB record
