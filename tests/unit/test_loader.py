"""Loader windows against plain slicing of the token stream, seeding, prefetch and errors."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import torch

from accelbench.config.errors import ConfigError
from accelbench.data.loader import Prefetcher, ShardBatches, SyntheticBatches, open_batches
from accelbench.data.shard_format import TokenShards, open_shards
from accelbench.data.shards import prepare


class NumberTokenizer:
    """Whitespace-separated integers are their own ids; eot 9999. Makes streams easy to predict."""

    name = "numbers"
    identity = "numbers vocab=10000 eot=9999"
    vocab_size = 10000
    eot_id = 9999

    def encode(self, text: str) -> list[int]:
        return [int(word) for word in text.split()]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(str(i) for i in ids)


def make_shards(tmp_path, total_docs: int = 10, shard_tokens: int = 100) -> tuple[TokenShards,
                                                                                   np.ndarray]:
    """Documents 0..48, 49..97, ... (49 ids + eot each), cut into shards of shard_tokens."""
    docs = [" ".join(str(d * 49 + i) for i in range(49)) for d in range(total_docs)]
    tok = NumberTokenizer()
    prepare(docs, tok, tmp_path, shard_tokens=shard_tokens, progress=False)
    stream = np.array([i for doc in docs for i in tok.encode(doc) + [9999]], dtype=np.int64)
    return open_shards(tmp_path, tok), stream


def test_random_windows_are_stream_slices_from_the_seeded_generator(tmp_path) -> None:
    shards, stream = make_shards(tmp_path)
    assert len(shards.arrays) == 5 and len(stream) == 500
    loader = ShardBatches(shards, seq_len=16, micro_batch=8, seed=7)
    rng = np.random.default_rng([7, 0])
    for _ in range(20):
        inputs, targets = loader.next_batch()
        assert inputs.dtype == targets.dtype == torch.int64 and inputs.shape == (8, 16)
        for row, start in enumerate(rng.integers(0, 500 - 16, size=8)):
            assert inputs[row].tolist() == stream[start:start + 16].tolist()
            assert targets[row].tolist() == stream[start + 1:start + 17].tolist()


def test_window_joins_shards(tmp_path) -> None:
    shards, stream = make_shards(tmp_path, shard_tokens=30)
    loader = ShardBatches(shards, seq_len=70, micro_batch=1)
    for start in (0, 25, 29, 30, 59, 500 - 71):
        assert loader.window(start).tolist() == stream[start:start + 71].tolist()


def test_sequential_covers_the_stream_in_order_and_wraps(tmp_path) -> None:
    shards, stream = make_shards(tmp_path)
    loader = ShardBatches(shards, seq_len=100, micro_batch=2, mode="sequential")
    assert loader.windows_per_epoch == 4  # 100 * 4 + 1 <= 500 < 100 * 5 + 1
    rows = [row for _ in range(3) for row in loader.next_batch()[0].tolist()]
    starts = [0, 100, 200, 300, 0, 100]
    assert rows == [stream[s:s + 100].tolist() for s in starts]


def test_ranks_take_interleaved_sequential_batches(tmp_path) -> None:
    shards, stream = make_shards(tmp_path)
    rank1 = ShardBatches(shards, seq_len=10, micro_batch=3, mode="sequential", rank=1,
                         world_size=2)
    first = rank1.next_batch()[0]
    assert first[0].tolist() == stream[30:40].tolist()  # windows 3, 4, 5
    second = rank1.next_batch()[0]
    assert second[0].tolist() == stream[90:100].tolist()  # windows 9, 10, 11


def test_same_seed_same_batches_other_seed_other(tmp_path) -> None:
    shards, _ = make_shards(tmp_path)
    a, b, c = (ShardBatches(shards, 16, 4, seed=s).next_batch()[0] for s in (1, 1, 2))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_fewer_tokens_than_one_window_is_refused(tmp_path) -> None:
    shards, _ = make_shards(tmp_path, total_docs=1)  # 50 tokens
    ShardBatches(shards, seq_len=49, micro_batch=1).next_batch()
    with pytest.raises(ConfigError, match="50 tokens, fewer than one window of seq\\+1 = 51"):
        ShardBatches(shards, seq_len=50, micro_batch=1)


def test_prefetcher_gives_the_same_batches_and_stops(tmp_path) -> None:
    shards, _ = make_shards(tmp_path)
    direct = ShardBatches(shards, 16, 4, seed=3)
    with Prefetcher(ShardBatches(shards, 16, 4, seed=3), depth=3, pin_memory=True) as ahead:
        for _ in range(10):
            got, want = next(ahead), direct.next_batch()
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert not ahead._thread.is_alive()


def test_prefetcher_hands_errors_to_the_consumer() -> None:
    def broken():
        yield torch.zeros(1, 2), torch.zeros(1, 2)
        raise RuntimeError("disk gone")

    with Prefetcher(broken()) as ahead:
        next(ahead)
        with pytest.raises(RuntimeError, match="disk gone"):
            next(ahead)


def test_synthetic_tokens_shape_range_shift_and_seed() -> None:
    a = SyntheticBatches(vocab_size=50257, seq_len=32, micro_batch=4, seed=5)
    inputs, targets = a.next_batch()
    assert inputs.shape == targets.shape == (4, 32) and inputs.dtype == torch.int64
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    assert 0 <= int(inputs.min()) and int(inputs.max()) < 50257
    again = SyntheticBatches(vocab_size=50257, seq_len=32, micro_batch=4, seed=5).next_batch()
    assert torch.equal(again[0], inputs)


def test_open_batches_checks_the_tokenizer(tmp_path) -> None:
    make_shards(tmp_path)
    batches = open_batches(str(tmp_path), NumberTokenizer(), seq_len=8, micro_batch=2)
    assert next(iter(batches))[0].shape == (2, 8)
    synthetic = open_batches("synthetic", NumberTokenizer(), seq_len=8, micro_batch=2)
    assert int(next(iter(synthetic))[0].max()) < 10000

    class OtherNumbers(NumberTokenizer):
        identity = "numbers-v2 vocab=10000 eot=9999"

    with pytest.raises(ConfigError, match="numbers-v2"):
        open_batches(str(tmp_path), OtherNumbers(), seq_len=8, micro_batch=2)
