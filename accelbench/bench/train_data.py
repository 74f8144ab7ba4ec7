"""Batches for the training benchmark: random tokens, or windows of prepared token shards."""

from __future__ import annotations

from typing import Protocol

import torch

from accelbench.bench.train_spec import TrainCell, TrainSpec


class BatchSource(Protocol):
    """Yields (inputs, targets) on the device, each (micro_batch, seq_len) int64."""

    def next(self) -> tuple[torch.Tensor, torch.Tensor]: ...

    def close(self) -> None: ...


class SyntheticBatches:
    """Uniform random token ids generated on the device: pure throughput, no input pipeline."""

    def __init__(self, vocab_size: int, micro_batch: int, seq_len: int, device: torch.device,
                 seed: int) -> None:
        self.shape = (micro_batch, seq_len + 1)
        self.vocab_size = vocab_size
        self.device = device
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A fresh random batch; targets are inputs shifted by one."""
        ids = torch.randint(0, self.vocab_size, self.shape, device=self.device,
                            generator=self.generator)
        return ids[:, :-1], ids[:, 1:]

    def close(self) -> None:
        """Nothing to release."""


def open_batches(spec: TrainSpec, cell: TrainCell, device: torch.device) -> BatchSource:
    """The batch source a spec names: synthetic, the built-in corpus, or a shard folder."""
    if spec.data == "synthetic":
        return SyntheticBatches(spec.model.vocab_size, cell.micro_batch, cell.seq_len, device,
                                spec.seed)
    from accelbench.bench.train_shards import shard_batches

    return shard_batches(spec, cell, device)
