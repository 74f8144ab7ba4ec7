"""GPT-2 BPE ids against published values and against Hugging Face's independent BPE."""

from __future__ import annotations

import json
import pickle
import shutil

import pytest

from accelbench.config.errors import ConfigError
from accelbench.data.tokenizer import (
    GPT2_FILE_SHA256,
    Gpt2Tokenizer,
    Tokenizer,
    get_tokenizer,
    gpt2_asset_dir,
)

TEXTS = [
    "Hello world!",
    "The quick brown fox jumps over the lazy dog.\n\nIt's 2023; we'll see 1,234.56 GB/s.",
    "  leading spaces,\ttabs\tand trailing   \n",
    "Ünïcödé: naïve café, 東京, Ελληνικά, emoji 🚀🔥 and math ∑ x_i² ≤ ∞",
    "def f(x):\n    return x ** 2  # comment <|endoftext|> stays text\n",
]


@pytest.fixture(scope="module")
def gpt2() -> Gpt2Tokenizer:
    return Gpt2Tokenizer()


@pytest.fixture(scope="module")
def hf_bpe():
    tokenizers = pytest.importorskip("tokenizers")
    folder = gpt2_asset_dir()
    return tokenizers.ByteLevelBPETokenizer(
        str(folder / "encoder.json"), str(folder / "vocab.bpe")
    )


def test_hello_world_is_the_published_ids(gpt2: Gpt2Tokenizer) -> None:
    assert gpt2.encode("Hello world!") == [15496, 995, 0]


def test_vocab_and_eot_match_the_encoder_file(gpt2: Gpt2Tokenizer) -> None:
    encoder = json.loads((gpt2_asset_dir() / "encoder.json").read_text(encoding="utf-8"))
    assert len(encoder) == gpt2.vocab_size == 50257
    assert encoder["<|endoftext|>"] == gpt2.eot_id == 50256


@pytest.mark.parametrize("text", TEXTS)
def test_ids_equal_hugging_face_byte_level_bpe(gpt2: Gpt2Tokenizer, hf_bpe, text: str) -> None:
    ours = gpt2.encode(text)
    assert ours == hf_bpe.encode(text).ids
    assert gpt2.decode(ours) == text


def test_batch_equals_one_by_one(gpt2: Gpt2Tokenizer) -> None:
    assert gpt2.encode_batch(TEXTS) == [gpt2.encode(t) for t in TEXTS]


def test_satisfies_protocol_and_pickles_small(gpt2: Gpt2Tokenizer) -> None:
    assert isinstance(gpt2, Tokenizer)
    blob = pickle.dumps(gpt2)
    assert len(blob) < 1000
    clone = pickle.loads(blob)
    assert clone.identity == gpt2.identity
    assert clone.encode(TEXTS[1]) == gpt2.encode(TEXTS[1])


def test_identity_names_both_file_hashes(gpt2: Gpt2Tokenizer) -> None:
    for digest in GPT2_FILE_SHA256.values():
        assert digest in gpt2.identity


def test_corrupt_file_is_refused_naming_it(tmp_path) -> None:
    for name in GPT2_FILE_SHA256:
        shutil.copy(gpt2_asset_dir() / name, tmp_path / name)
    data = bytearray((tmp_path / "vocab.bpe").read_bytes())
    data[100] ^= 1
    (tmp_path / "vocab.bpe").write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=r"vocab\.bpe has sha256"):
        Gpt2Tokenizer(tmp_path)


def test_missing_file_and_unknown_name_are_config_errors(tmp_path) -> None:
    with pytest.raises(ConfigError, match="encoder.json is missing"):
        Gpt2Tokenizer(tmp_path)
    with pytest.raises(ConfigError, match="unknown tokenizer 'gpt3'"):
        get_tokenizer("gpt3")
