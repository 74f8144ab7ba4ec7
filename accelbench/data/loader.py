"""Training batches: (input, target) token windows from shards or random tokens, as int64 tensors.

A window is seq_len + 1 consecutive tokens; input = window[:-1], target = window[1:]. Windows may
cross shard boundaries (the shards are one token stream). Random mode draws window starts with a
seeded numpy generator (one stream per data-parallel rank); sequential mode walks the stream in
non-overlapping steps of seq_len and wraps around. Checking seq_len against the model's positions
is the caller's job; a corpus shorter than one window is refused here.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from accelbench.config.errors import ConfigError, require_choice, require_positive
from accelbench.data.shard_format import TokenShards, open_shards
from accelbench.data.tokenizer import Tokenizer
from accelbench.hardware import device as devices

Batch = tuple[torch.Tensor, torch.Tensor]
MODES = ("random", "sequential")


class Batches(Protocol):
    """An endless source of (input, target) batches of shape [micro_batch, seq_len]."""

    def __iter__(self) -> Iterator[Batch]: ...


def _split(windows: torch.Tensor) -> Batch:
    """[B, seq+1] windows to contiguous (input, target)."""
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


class ShardBatches:
    """Windows from prepared shards (memory-mapped), random or sequential."""

    def __init__(
        self,
        shards: TokenShards,
        seq_len: int,
        micro_batch: int,
        *,
        seed: int = 0,
        mode: str = "random",
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        require_positive("seq", seq_len)
        require_positive("micro_batch", micro_batch)
        require_choice("data_order", mode, MODES)
        if not 0 <= rank < world_size:
            raise ConfigError("rank", f"rank {rank} outside world size {world_size}")
        window = seq_len + 1
        if shards.total_tokens < window:
            raise ConfigError(
                "seq",
                f"shards in {shards.directory} hold {shards.total_tokens} tokens, fewer than one "
                f"window of seq+1 = {window}",
                f"seq <= {shards.total_tokens - 1}, or a larger corpus",
            )
        self.shards, self.seq_len, self.micro_batch = shards, seq_len, micro_batch
        self.mode, self.rank, self.world_size = mode, rank, world_size
        self._rng = np.random.default_rng([seed, rank])
        self._ends = np.cumsum([len(a) for a in shards.arrays])
        self._step = 0

    @property
    def windows_per_epoch(self) -> int:
        """Non-overlapping windows in the stream (sequential mode's cycle length)."""
        return (self.shards.total_tokens - 1) // self.seq_len

    def window(self, start: int) -> np.ndarray:
        """seq_len + 1 tokens from global position `start`, joined across shard ends."""
        out = np.empty(self.seq_len + 1, dtype=np.int64)
        filled = 0
        shard = int(np.searchsorted(self._ends, start, side="right"))
        while filled < len(out):
            array = self.shards.arrays[shard]
            local = start + filled - (self._ends[shard] - len(array))
            piece = array[local:local + len(out) - filled]
            out[filled:filled + len(piece)] = piece
            filled += len(piece)
            shard += 1
        return out

    def starts(self) -> np.ndarray:
        """Window starts of the next batch."""
        if self.mode == "random":
            high = self.shards.total_tokens - self.seq_len  # exclusive: last start + seq + 1 fits
            return self._rng.integers(0, high, size=self.micro_batch)
        first = (self._step * self.world_size + self.rank) * self.micro_batch
        numbers = np.arange(first, first + self.micro_batch) % self.windows_per_epoch
        return numbers * self.seq_len

    def next_batch(self) -> Batch:
        """The next (input, target), int64 on the CPU."""
        windows = np.stack([self.window(int(s)) for s in self.starts()])
        self._step += 1
        return _split(torch.from_numpy(windows))

    def __iter__(self) -> Iterator[Batch]:
        while True:
            yield self.next_batch()


class SyntheticBatches:
    """Uniform random token ids for pure-throughput runs (no data loading cost to speak of)."""

    def __init__(
        self, vocab_size: int, seq_len: int, micro_batch: int, *, seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        for field, value in (("vocab_size", vocab_size), ("seq", seq_len),
                             ("micro_batch", micro_batch)):
            require_positive(field, value)
        self.vocab_size, self.seq_len, self.micro_batch = vocab_size, seq_len, micro_batch
        self.device = torch.device(device)
        self._generator = torch.Generator(device=self.device).manual_seed(seed)

    def next_batch(self) -> Batch:
        """Random windows of seq_len + 1 ids, split like real ones (target = shifted input)."""
        windows = torch.randint(
            0, self.vocab_size, (self.micro_batch, self.seq_len + 1),
            generator=self._generator, device=self.device, dtype=torch.int64,
        )
        return _split(windows)

    def __iter__(self) -> Iterator[Batch]:
        while True:
            yield self.next_batch()


class Prefetcher:
    """Builds batches in a background thread, `depth` ahead, optionally in pinned memory.

    Pinning is skipped when no CUDA device is present (it would fail on CPU-only builds).
    Use as a context manager, or call close(), so the thread stops.
    """

    def __init__(self, batches: Batches, depth: int = 2, pin_memory: bool = False) -> None:
        require_positive("prefetch", depth)
        self._source = iter(batches)
        self._pin = pin_memory and devices.is_available("cuda")
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="accelbench-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Producer loop; an exception is handed to the consumer instead of a batch."""
        try:
            while not self._stop.is_set():
                inputs, targets = next(self._source)
                if self._pin:
                    inputs, targets = inputs.pin_memory(), targets.pin_memory()
                self._put((inputs, targets))
        except BaseException as err:  # noqa: BLE001 - re-raised in the consumer thread
            self._put(err)

    def _put(self, item: object) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        item = self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        """Stop the producer thread and wait for it."""
        self._stop.set()
        self._thread.join(timeout=5)

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_batches(
    data: str,
    tokenizer: Tokenizer,
    seq_len: int,
    micro_batch: int,
    *,
    seed: int = 0,
    mode: str = "random",
    rank: int = 0,
    world_size: int = 1,
    default_max_tokens: int | None = None,
    verify_hashes: bool = True,
) -> Batches:
    """--data value to batches: "synthetic", "default" (built-in corpus, prepared on first use)
    or a folder of prepared shards (checked against `tokenizer`; hashed unless the caller
    already verified them)."""
    if data == "synthetic":
        return SyntheticBatches(tokenizer.vocab_size, seq_len, micro_batch, seed=seed + rank)
    if data == "default":
        from accelbench.data.defaults import ensure_default_shards

        shards = ensure_default_shards(tokenizer, max_tokens=default_max_tokens)
    else:
        shards = open_shards(Path(data).expanduser(), tokenizer, verify_hashes=verify_hashes)
    return ShardBatches(shards, seq_len, micro_batch, seed=seed, mode=mode, rank=rank,
                        world_size=world_size)
