"""Batches for the training benchmark, on the device: random tokens or prepared token shards."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import torch

from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.errors import ConfigError
from accelbench.data.loader import Batch, Prefetcher, SyntheticBatches
from accelbench.data.loader import open_batches as open_host_batches
from accelbench.data.shard_format import open_shards
from accelbench.data.tokenizer import get_tokenizer


class BatchSource:
    """(inputs, targets) on the device; shard batches are built ahead in a background thread."""

    def __init__(self, batches: Iterator[Batch], device: torch.device,
                 prefetcher: Prefetcher | None = None) -> None:
        self._batches = batches
        self._device = device
        self._prefetcher = prefetcher

    def next(self) -> Batch:
        """The next batch, copied to the device if it was built on the host."""
        x, y = next(self._batches)
        if x.device != self._device:
            x = x.to(self._device, non_blocking=True)
            y = y.to(self._device, non_blocking=True)
        return x, y

    def close(self) -> None:
        """Stop the background thread, if any."""
        if self._prefetcher is not None:
            self._prefetcher.close()


def check_data(spec: TrainSpec) -> None:
    """Refuse bad data before anything runs: vocabulary too large, missing or corrupt shards,
    shards made with another tokenizer (ConfigError, exit 2)."""
    if spec.data == "synthetic":
        return
    tokenizer = get_tokenizer(spec.tokenizer)
    if tokenizer.vocab_size > spec.model.vocab_size:
        raise ConfigError("data", f"tokenizer {tokenizer.name} has {tokenizer.vocab_size} ids but "
                          f"the model's vocabulary is {spec.model.vocab_size}",
                          f"a model with vocab_size >= {tokenizer.vocab_size}")
    if spec.data != "default":
        directory = Path(spec.data).expanduser().resolve()
        _verify_shards(str(directory), spec.tokenizer, _mtimes_ns(directory))


def _mtimes_ns(directory: Path) -> tuple[int, ...]:
    """Modification times of the folder's files: a shard rewritten since is hashed again."""
    if not directory.is_dir():
        return ()
    return tuple(sorted(f.stat().st_mtime_ns for f in directory.iterdir() if f.is_file()))


@cache
def _verify_shards(directory: str, tokenizer_name: str, _mtimes: tuple[int, ...]) -> None:
    """Hash every shard once per process (a sweep's cells then open them unhashed: hashing
    an 18 GB corpus again for each cell would cost more than the cell)."""
    open_shards(directory, get_tokenizer(tokenizer_name))


def open_batches(spec: TrainSpec, cell: TrainCell, device: torch.device) -> BatchSource:
    """The source `spec.data` names: synthetic (made on the device), default, or a shard folder."""
    if spec.data == "synthetic":
        synthetic = SyntheticBatches(spec.model.vocab_size, cell.seq_len, cell.micro_batch,
                                     seed=spec.seed, device=device)
        return BatchSource(iter(synthetic), device)
    tokenizer = get_tokenizer(spec.tokenizer)
    check_data(spec)  # hashes the shards unless this process already has
    host = open_host_batches(spec.data, tokenizer, cell.seq_len, cell.micro_batch, seed=spec.seed,
                             verify_hashes=False)
    prefetcher = Prefetcher(host, depth=2, pin_memory=device.type == "cuda")
    return BatchSource(iter(prefetcher), device, prefetcher)
