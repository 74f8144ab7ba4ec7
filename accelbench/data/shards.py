"""Preparing token shards: a corpus tokenized into fixed-size uint16 files plus an index,
resumable (the format and reading it: accelbench.data.shard_format).

Documents are grouped into chunks of about `chunk_chars` characters (independent of the number of
workers, so the tokens never depend on it); worker processes tokenize chunks, the main process
cuts the stream into shards of exactly `shard_tokens` (the last one may be shorter), writes each
to a temporary name, renames it, then rewrites the index. Each index entry records where in the
chunk stream the next shard starts, so a rerun after a kill skips finished shards and resumes.
numpy and the process pool are imported where they are used: the CLI imports this module for its
defaults.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.config.errors import ConfigError, require_positive
from accelbench.config.paths import check_out_dir
from accelbench.data.corpus import Corpus, IterableCorpus
from accelbench.data.shard_format import (
    INDEX_NAME,
    SCHEMA_VERSION,
    read_index,
    shard_dtype,
    shard_name,
)
from accelbench.data.tokenizer import Tokenizer

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    import numpy as np

DEFAULT_SHARD_TOKENS = 1 << 24  # 16,777,216 tokens = 32 MiB of uint16 per shard
DEFAULT_CHUNK_CHARS = 1 << 18  # characters of text per unit of work sent to a worker
# Settings that must be equal for a rerun to resume an existing folder.
_RESUME_KEYS = ("schema_version", "tokenizer", "dtype", "shard_tokens", "chunk_chars",
                "max_tokens", "source")


def _chunks(documents: Iterable[str], chunk_chars: int) -> Iterator[list[str]]:
    """Group documents in order into lists of at least chunk_chars characters (last: fewer)."""
    chunk: list[str] = []
    size = 0
    for doc in documents:
        chunk.append(doc)
        size += len(doc)
        if size >= chunk_chars:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _tokenize(tokenizer: Tokenizer, docs: list[str], dtype: np.dtype) -> np.ndarray:
    """One chunk to a flat id array: each document followed by the eot id."""
    import numpy as np

    pieces = []
    eot = np.array([tokenizer.eot_id], dtype=dtype)
    for ids in tokenizer.encode_batch(docs):
        pieces.append(np.asarray(ids, dtype=dtype))
        pieces.append(eot)
    return np.concatenate(pieces) if pieces else np.empty(0, dtype=dtype)


_WORKER_STATE: dict = {}


def _die_with_parent() -> None:
    """Linux: have the kernel kill this worker when its parent dies (a SIGKILLed prepare)."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def _worker_init(tokenizer: Tokenizer, dtype_str: str, parent_pid: int) -> None:
    """Runs once in each worker process: keep the tokenizer it received."""
    _die_with_parent()
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    import numpy as np

    _WORKER_STATE["tokenizer"] = tokenizer
    _WORKER_STATE["dtype"] = np.dtype(dtype_str)


def _worker_tokenize(docs: list[str]) -> np.ndarray:
    """Work item of a worker process."""
    return _tokenize(_WORKER_STATE["tokenizer"], docs, _WORKER_STATE["dtype"])


def _process_pool(tokenizer: Tokenizer, dtype: np.dtype, workers: int) -> ProcessPoolExecutor:
    """Worker processes; fork where the platform has it (spawn cannot start from `python -`)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context(method),
        initializer=_worker_init, initargs=(tokenizer, dtype.str, os.getpid()),
    )


def _tokenized_chunks(
    corpus: Corpus, tokenizer: Tokenizer, dtype: np.dtype, chunk_chars: int,
    start_chunk: int, workers: int,
) -> Iterator[tuple[int, np.ndarray]]:
    """(chunk number, ids) in order from start_chunk on; at most 2 chunks per worker in flight."""
    numbered = enumerate(_chunks(corpus.documents(), chunk_chars))
    todo = ((i, docs) for i, docs in numbered if i >= start_chunk)
    if workers <= 1:
        for i, docs in todo:
            yield i, _tokenize(tokenizer, docs, dtype)
        return
    pool = _process_pool(tokenizer, dtype, workers)
    try:
        pending: deque = deque()
        for i, docs in todo:
            pending.append((i, pool.submit(_worker_tokenize, docs)))
            if len(pending) >= 2 * workers:
                first, future = pending.popleft()
                yield first, future.result()
        while pending:
            first, future = pending.popleft()
            yield first, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class _TokenBuffer:
    """Token pieces waiting to be cut into shards, each remembering where it came from."""

    def __init__(self) -> None:
        self.pieces: deque[tuple[int, int, np.ndarray]] = deque()  # (chunk, offset, ids)
        self.size = 0
        self.last_chunk = -1

    def add(self, chunk: int, offset: int, ids: np.ndarray) -> None:
        """Append ids that start at `offset` within chunk `chunk`."""
        self.last_chunk = chunk
        if len(ids):
            self.pieces.append((chunk, offset, ids))
            self.size += len(ids)

    def take(self, count: int) -> tuple[np.ndarray, dict]:
        """Remove the first `count` ids; also return where the stream continues after them."""
        import numpy as np

        out = []
        need = count
        while need:
            chunk, offset, ids = self.pieces.popleft()
            out.append(ids[:need])
            if len(ids) > need:
                self.pieces.appendleft((chunk, offset + need, ids[need:]))
            need -= len(out[-1])
        self.size -= count
        if self.pieces:
            resume = {"chunk": self.pieces[0][0], "offset": self.pieces[0][1]}
        else:
            resume = {"chunk": self.last_chunk + 1, "offset": 0}
        return np.concatenate(out), resume


def _write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary name, flush to disk, then rename: a kill leaves old or new, whole."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _write_shard(out_dir: Path, number: int, ids: np.ndarray, resume: dict) -> dict:
    """Write one shard file and return its index entry."""
    import hashlib

    data = ids.tobytes()
    _write_atomic(out_dir / shard_name(number), data)
    return {"file": shard_name(number), "tokens": int(len(ids)),
            "sha256": hashlib.sha256(data).hexdigest(), "resume": resume}


def _write_index(out_dir: Path, index: dict) -> None:
    """Rewrite index.json atomically."""
    _write_atomic(out_dir / INDEX_NAME, (json.dumps(index, indent=1) + "\n").encode())


def _settings(corpus: Corpus, tokenizer: Tokenizer, shard_tokens: int,
              max_tokens: int | None, chunk_chars: int) -> dict:
    """The part of the index that fixes the tokens; a resumed run must match it exactly."""
    return {
        "schema_version": SCHEMA_VERSION,
        "tokenizer": {"name": tokenizer.name, "identity": tokenizer.identity,
                      "vocab_size": tokenizer.vocab_size, "eot_id": tokenizer.eot_id},
        "dtype": shard_dtype(tokenizer.vocab_size).name,
        "shard_tokens": shard_tokens,
        "chunk_chars": chunk_chars,
        "max_tokens": max_tokens,
        "source": corpus.description,
    }


def _start_or_resume(out_dir: Path, settings: dict) -> dict:
    """Existing index with the same settings, or a fresh one; other settings are refused."""
    for stale in out_dir.glob("*.tmp"):
        stale.unlink()
    path = out_dir / INDEX_NAME
    if not path.exists():
        return {**settings, "complete": False, "total_tokens": 0, "shards": []}
    index = read_index(out_dir)
    differ = [key for key in _RESUME_KEYS if index.get(key) != settings[key]]
    if differ:
        raise ConfigError(
            "out", f"{out_dir} holds shards prepared with other {', '.join(differ)}",
            "an empty folder, or the same options to resume",
        )
    return index


LOCK_NAME = ".lock"
_LOCK_TRIES = 3


LOCK_POLL_S = 0.2  # how often a preparation waiting for another process tries its lock


@contextlib.contextmanager
def _folder_lock(out_dir: Path, wait_s: float = 0.0) -> Iterator[None]:
    """One preparation per folder at a time (POSIX record lock: owned by this process alone,
    so forked workers do not inherit it, and the kernel drops it when the process dies). The
    lock file is removed on the way out, however the preparation ends (done, refused, killed
    by an exception), while the lock is still held; a process that locked a file removed
    meanwhile sees it is no longer the folder's lock file and tries again. Another process's
    lock is waited for up to wait_s seconds, then refused."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    path = out_dir / LOCK_NAME
    deadline = time.monotonic() + wait_s
    tries = 0
    while tries < _LOCK_TRIES:
        with open(path, "a") as handle:
            try:
                fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if time.monotonic() >= deadline:
                    raise _busy(out_dir, wait_s) from err
                time.sleep(LOCK_POLL_S)
                continue
            tries += 1
            if not _is_file_at(handle.fileno(), path):
                continue  # its holder finished and removed it: lock the folder's new file
            try:
                yield
            finally:
                path.unlink(missing_ok=True)
            return
    raise _busy(out_dir, wait_s)


def _busy(out_dir: Path, wait_s: float) -> ConfigError:
    """The refusal of a folder another process is preparing."""
    waited = f" (waited {wait_s:g} s)" if wait_s > 0 else ""
    return ConfigError("out", f"{out_dir} is being prepared by another process{waited}",
                       "one preparation per folder at a time")


def _is_file_at(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is still the file at `path`."""
    try:
        there = path.stat()
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _first_missing(folder: Path) -> Path | None:
    """The outermost folder of `folder` (itself included) that does not exist yet, or None."""
    missing = None
    while not folder.exists() and folder != folder.parent:
        missing, folder = folder, folder.parent
    return missing


def _remove_if_empty(folder: Path, up_to: Path) -> None:
    """Remove `folder` and its parents up to `up_to` where each is empty (a refused
    preparation leaves none of the folders it made)."""
    while True:
        try:
            folder.rmdir()
        except OSError:
            return
        if folder == up_to or folder == folder.parent:
            return
        folder = folder.parent


def prepare(
    corpus: Corpus | Iterable[str],
    tokenizer: Tokenizer,
    out_dir: Path | str,
    *,
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    max_tokens: int | None = None,
    workers: int = 1,
    chunk_chars: int = DEFAULT_CHUNK_CHARS,
    progress: bool = True,
    wait_s: float = 0.0,
) -> dict:
    """Tokenize a corpus (or any iterable of documents) into shards in out_dir; return the index.

    Rerunning with the same arguments resumes a killed run and returns at once when complete.
    Another process preparing out_dir is waited for up to wait_s seconds (0: refused at once),
    after which this one finds its shards complete, or resumes them.
    """
    for field, value in (("shard_tokens", shard_tokens), ("workers", workers),
                         ("chunk_chars", chunk_chars)):
        require_positive(field, value)
    if max_tokens is not None:
        require_positive("max_tokens", max_tokens)
    if not isinstance(corpus, Corpus):
        corpus = IterableCorpus(corpus)
    out_dir = check_out_dir(Path(out_dir))
    made = _first_missing(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = _settings(corpus, tokenizer, shard_tokens, max_tokens, chunk_chars)
    try:
        with _folder_lock(out_dir, wait_s):
            index = _start_or_resume(out_dir, settings)
            if not index["complete"]:
                _fill(corpus, tokenizer, out_dir, index, workers, progress)
    except ConfigError:
        if made is not None:
            _remove_if_empty(out_dir, made)
        raise
    return index


def _fill(corpus: Corpus, tokenizer: Tokenizer, out_dir: Path, index: dict,
          workers: int, progress: bool) -> None:
    """The preparation loop: tokenized chunks in, shards and index updates out."""
    import numpy as np

    from accelbench.data.progress import token_progress

    shards = index["shards"]
    resume = shards[-1]["resume"] if shards else {"chunk": 0, "offset": 0}
    limit = index["max_tokens"] or float("inf")
    dtype = np.dtype(index["dtype"]).newbyteorder("<")
    buffer = _TokenBuffer()

    def cut_size() -> int:
        return int(min(index["shard_tokens"], limit - index["total_tokens"]))

    def emit(count: int) -> None:
        ids, after = buffer.take(count)
        shards.append(_write_shard(out_dir, len(shards), ids, after))
        index["total_tokens"] += count
        _write_index(out_dir, index)
        bar.advance(count, len(shards))

    with token_progress(index["max_tokens"], index["total_tokens"], len(shards),
                        enabled=progress) as bar:
        chunks = _tokenized_chunks(corpus, tokenizer, dtype, index["chunk_chars"],
                                   resume["chunk"], workers)
        with contextlib.closing(chunks):
            for number, ids in chunks:
                offset = resume["offset"] if number == resume["chunk"] else 0
                buffer.add(number, offset, ids[offset:])
                while index["total_tokens"] < limit and buffer.size >= cut_size():
                    emit(cut_size())
                if index["total_tokens"] >= limit:
                    break
        if buffer.size and index["total_tokens"] < limit:
            emit(buffer.size)
        index["complete"] = True
        _write_index(out_dir, index)
