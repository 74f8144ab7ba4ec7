"""Corpora to shards and back: round trip, resume after SIGKILL, and refused bad shards."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from accelbench.config.errors import ConfigError
from accelbench.data.corpus import FileCorpus, StdlibDocstringCorpus, resolve_source
from accelbench.data.defaults import ensure_default_shards
from accelbench.data.shard_format import INDEX_NAME, open_shards
from accelbench.data.shards import prepare
from accelbench.data.tokenizer import Gpt2Tokenizer, Tokenizer

REPO = Path(__file__).resolve().parents[2]
WORDS = ("the model trains on tokens while accelerators multiply matrices of numbers and "
         "memory bandwidth limits what each layer can do per second, it's 42% faster").split()


def make_docs(count: int, seed: int = 0) -> list[str]:
    """Deterministic English-like documents of varying length."""
    rng = random.Random(seed)
    return [f"Document {i}. " + " ".join(rng.choices(WORDS, k=rng.randint(20, 300)))
            for i in range(count)]


class ByteTokenizer:
    """A second real tokenizer: UTF-8 bytes as ids, eot 256 (different identity from GPT-2)."""

    name = "bytes"
    identity = "utf8-bytes vocab=257 eot=256"
    vocab_size = 257
    eot_id = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(i for i in ids if i < 256).decode()


@pytest.fixture(scope="module")
def gpt2() -> Gpt2Tokenizer:
    return Gpt2Tokenizer()


def expected_stream(tokenizer: Tokenizer, docs: list[str]) -> list[int]:
    """Hand-built stream: each document's ids followed by eot."""
    out: list[int] = []
    for doc in docs:
        out += tokenizer.encode(doc) + [tokenizer.eot_id]
    return out


def test_round_trip_sizes_hashes_and_index(tmp_path, gpt2) -> None:
    docs = make_docs(40)
    index = prepare(docs, gpt2, tmp_path, shard_tokens=1000, chunk_chars=3000, progress=False)
    stream = expected_stream(gpt2, docs)
    shards = open_shards(tmp_path, gpt2)
    assert shards.tokens().tolist() == stream
    assert [s["tokens"] for s in index["shards"]][:-1] == [1000] * (len(stream) // 1000)
    assert index["total_tokens"] == len(stream) and index["complete"]
    assert index["dtype"] == "uint16" and index["tokenizer"]["identity"] == gpt2.identity
    first = tmp_path / index["shards"][0]["file"]
    assert first.stat().st_size == 2000
    assert hashlib.sha256(first.read_bytes()).hexdigest() == index["shards"][0]["sha256"]
    assert np.fromfile(first, dtype="<u2").tolist() == stream[:1000]
    assert gpt2.decode(stream[: stream.index(gpt2.eot_id)]) == docs[0]


def test_workers_and_chunking_do_not_change_tokens(tmp_path, gpt2) -> None:
    docs = make_docs(30, seed=1)
    prepare(docs, gpt2, tmp_path / "a", shard_tokens=700, chunk_chars=500, progress=False)
    prepare(docs, gpt2, tmp_path / "b", shard_tokens=700, chunk_chars=9000, workers=2,
            progress=False)
    a, b = open_shards(tmp_path / "a"), open_shards(tmp_path / "b")
    assert a.tokens().tolist() == b.tokens().tolist() == expected_stream(gpt2, docs)


def test_max_tokens_cuts_the_stream(tmp_path, gpt2) -> None:
    docs = make_docs(30, seed=2)
    index = prepare(docs, gpt2, tmp_path, shard_tokens=600, max_tokens=1500, progress=False)
    assert [s["tokens"] for s in index["shards"]] == [600, 600, 300]
    assert open_shards(tmp_path).tokens().tolist() == expected_stream(gpt2, docs)[:1500]


_KILLED_RUN = """
import sys, time
sys.path.insert(0, {repo!r})
from tests.unit.test_shards import make_docs
from accelbench.data.shards import prepare
from accelbench.data.tokenizer import Gpt2Tokenizer
def slow_docs():
    for doc in make_docs(300, seed=3):
        time.sleep(0.01)
        yield doc
prepare(slow_docs(), Gpt2Tokenizer(), sys.argv[1], shard_tokens=2000, chunk_chars=2000,
        workers=2, progress=False)
"""


def _shard_count(out: Path) -> int:
    try:
        return len(json.loads((out / INDEX_NAME).read_text())["shards"])
    except (OSError, ValueError):
        return 0


def _processes_mentioning(text: str) -> list[int]:
    """Pids whose command line contains text (Linux /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_resume_after_sigkill_gives_the_uninterrupted_tokens(tmp_path, gpt2) -> None:
    docs = make_docs(300, seed=3)
    full = prepare(docs, gpt2, tmp_path / "full", shard_tokens=2000, chunk_chars=2000,
                   progress=False)
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN.format(repo=str(REPO)), str(out)])
    deadline = time.monotonic() + 60
    while _shard_count(out) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    if sys.platform == "linux":  # its worker processes died with it
        time.sleep(0.3)
        assert _processes_mentioning(str(out)) == []
    partial = json.loads((out / INDEX_NAME).read_text())
    assert not partial["complete"] and 3 <= len(partial["shards"]) < len(full["shards"])
    first_mtime = (out / "shard_00000.bin").stat().st_mtime_ns
    resumed = prepare(docs, gpt2, out, shard_tokens=2000, chunk_chars=2000, workers=2,
                      progress=False)
    assert (out / "shard_00000.bin").stat().st_mtime_ns == first_mtime  # skipped, not redone
    assert [s["sha256"] for s in resumed["shards"]] == [s["sha256"] for s in full["shards"]]
    assert open_shards(out).tokens().tolist() == expected_stream(gpt2, docs)
    assert not list(out.glob("*.tmp"))


def test_rerun_with_other_settings_is_refused(tmp_path, gpt2) -> None:
    docs = make_docs(5)
    prepare(docs, gpt2, tmp_path, shard_tokens=500, progress=False)
    with pytest.raises(ConfigError, match="other shard_tokens"):
        prepare(docs, gpt2, tmp_path, shard_tokens=400, progress=False)


@pytest.fixture()
def prepared(tmp_path, gpt2) -> Path:
    prepare(make_docs(20), gpt2, tmp_path, shard_tokens=800, progress=False)
    return tmp_path


def test_corrupt_shard_is_named(prepared) -> None:
    path = prepared / "shard_00001.bin"
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=r"shard_00001\.bin has sha256"):
        open_shards(prepared)
    open_shards(prepared, verify_hashes=False)  # the size alone still matches


def test_truncated_and_missing_shards_are_named(prepared) -> None:
    path = prepared / "shard_00002.bin"
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(ConfigError, match=r"shard_00002\.bin has 1598 bytes.*says 1600"):
        open_shards(prepared)
    path.unlink()
    with pytest.raises(ConfigError, match=r"shard shard_00002\.bin .* is missing"):
        open_shards(prepared)


def test_other_tokenizer_is_refused_naming_both(prepared, gpt2) -> None:
    other = ByteTokenizer()
    with pytest.raises(ConfigError) as err:
        open_shards(prepared, other)
    assert gpt2.identity in str(err.value) and other.identity in str(err.value)


def test_unfinished_or_absent_index_is_refused(prepared, tmp_path) -> None:
    index = json.loads((prepared / INDEX_NAME).read_text())
    index["complete"] = False
    (prepared / INDEX_NAME).write_text(json.dumps(index))
    with pytest.raises(ConfigError, match="did not finish"):
        open_shards(prepared)
    with pytest.raises(ConfigError, match="no such folder"):
        open_shards(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="has no index.json"):
        open_shards(tmp_path / "empty")


def test_second_tokenizer_uses_the_same_writer(tmp_path) -> None:
    tok = ByteTokenizer()
    index = prepare(["héllo", "ab"], tok, tmp_path, shard_tokens=4, progress=False)
    assert open_shards(tmp_path, tok).tokens().tolist() == [104, 195, 169, 108, 108, 111, 256,
                                                            97, 98, 256]
    assert [s["tokens"] for s in index["shards"]] == [4, 4, 2]


def test_file_sources_in_sorted_order(tmp_path, gpt2) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("plain text file")
    (tmp_path / "sub" / "b.jsonl").write_text('{"body": "one"}\n\n{"body": "two"}\n')
    pq.write_table(pa.table({"body": ["three", "four"]}), tmp_path / "sub" / "c.parquet")
    (tmp_path / "notes.md").write_text("ignored")
    corpus = resolve_source(str(tmp_path), text_field="body")
    assert list(corpus.documents()) == ["plain text file", "one", "two", "three", "four"]
    with pytest.raises(ConfigError, match="no string field 'text'"):
        list(FileCorpus(tmp_path / "sub" / "b.jsonl").documents())
    with pytest.raises(ConfigError, match="no column 'text'"):
        list(FileCorpus(tmp_path / "sub" / "c.parquet").documents())
    with pytest.raises(ConfigError, match="neither a keyword nor an existing path"):
        resolve_source(str(tmp_path / "missing"))


def test_default_corpus_is_deterministic_english_docstrings(tmp_path, gpt2) -> None:
    first = list(itertools.islice(StdlibDocstringCorpus().documents(), 3))
    assert first == list(itertools.islice(StdlibDocstringCorpus().documents(), 3))
    assert all(len(d) > 100 for d in first) and "def " not in first[0].split("\n")[0]
    started = time.monotonic()
    shards = ensure_default_shards(gpt2, max_tokens=20_000, out_dir=tmp_path)
    assert time.monotonic() - started < 10
    assert shards.total_tokens == 20_000
    assert shards.tokens()[:50].tolist() == expected_stream(gpt2, first)[:50]


@pytest.mark.slow
def test_cli_info_lists_on_stdout_and_a_markup_like_path_prints(tmp_path, gpt2) -> None:
    folder = tmp_path / "runs[/x]" / "[bold]shards"
    prepare(make_docs(5), gpt2, folder, shard_tokens=800, progress=False)
    shown = subprocess.run(
        [sys.executable, "-m", "accelbench.cli.main", "data", "info", str(folder)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert str(folder) in shown.stdout and "tokenizer" in shown.stdout  # the listing
    assert shown.stderr.startswith("ok: ") and "tokenizer" not in shown.stderr


@pytest.mark.slow
def test_cli_info_reports_a_corrupt_shard_in_one_line(prepared) -> None:
    (prepared / "shard_00001.bin").write_bytes(b"\0" * 1600)
    bad = subprocess.run(
        [sys.executable, "-m", "accelbench.cli.main", "data", "info", str(prepared)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith("error: data: shard ")
    assert "shard_00001.bin has sha256" in bad.stderr


def _bad_jsonl(path: Path) -> Path:
    """A JSONL file whose first line reads and whose second is not JSON: refused mid-way."""
    path.write_text('{"text": "a first document"}\nnot json\n')
    return path


def test_a_refused_source_leaves_no_lock_and_no_folder_it_made(tmp_path, monkeypatch,
                                                               capsys) -> None:
    """A source refused during preparation (line 2 of a JSONL file) ends in one error line,
    exit 2, and removes the lock file and the folders prepare made; a folder that existed
    stays, without a lock file."""
    from cli_run import run_main

    bad = _bad_jsonl(tmp_path / "bad.jsonl")
    out = tmp_path / "new" / "shards"
    code, _, err = run_main(monkeypatch, capsys, "data", "prepare", "--source", str(bad),
                            "--out", str(out), "--no-progress")
    assert (code, err) == (2, f"error: source: {bad}:2 is not JSON (Expecting value)\n")
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    with pytest.raises(ConfigError, match="is not JSON"):
        prepare(FileCorpus(bad), Gpt2Tokenizer(), kept, progress=False)
    assert kept.is_dir() and list(kept.iterdir()) == []


def test_a_finished_preparation_leaves_no_lock(tmp_path, gpt2) -> None:
    prepare(make_docs(3), gpt2, tmp_path / "s", shard_tokens=500, progress=False)
    assert not (tmp_path / "s" / ".lock").exists() and (tmp_path / "s" / INDEX_NAME).exists()


_HOLD_LOCK = """
import fcntl, sys
handle = open(sys.argv[1], "a")
fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX record locks")
def test_a_folder_another_process_prepares_is_refused_and_its_lock_kept(tmp_path, gpt2) -> None:
    out = tmp_path / "s"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(out / ".lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"  # the child holds the lock from here
        with pytest.raises(ConfigError, match="is being prepared by another process"):
            prepare(make_docs(3), gpt2, out, shard_tokens=500, progress=False)
        assert (out / ".lock").exists()  # the holder's, not ours to remove
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    prepare(make_docs(3), gpt2, out, shard_tokens=500, progress=False)  # released: it runs
    assert not (out / ".lock").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX record locks")
def test_a_preparation_asked_to_wait_runs_once_the_other_process_lets_go(tmp_path, gpt2) -> None:
    """ensure_default_shards' way (several commands needing the default corpus at once): the
    second waits for the first's lock, refused only once wait_s has passed."""
    out = tmp_path / "s"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(out / ".lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        started = time.monotonic()
        with pytest.raises(ConfigError, match=r"another process \(waited 0.5 s\)"):
            prepare(make_docs(3), gpt2, out, shard_tokens=500, progress=False, wait_s=0.5)
        assert time.monotonic() - started >= 0.5
        threading.Timer(0.5, holder.stdin.close).start()  # lets go while the next one waits
        index = prepare(make_docs(3), gpt2, out, shard_tokens=500, progress=False, wait_s=60)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert index["complete"] and not (out / ".lock").exists()
