"""Hugging Face `datasets` sources, read by the real library from a local dataset folder."""

from __future__ import annotations

import json

import pytest

from accelbench.config.errors import ConfigError
from accelbench.data.corpus import HFDatasetCorpus, parse_hf_source, resolve_source
from accelbench.data.shard_format import open_shards
from accelbench.data.shards import prepare
from accelbench.data.tokenizer import Gpt2Tokenizer

pytest.importorskip("datasets")
TEXTS = ["Hello world!", "The quick brown fox.", "Genomes are read as codons."]


@pytest.fixture
def local_dataset(tmp_path):
    """A dataset folder as `datasets` reads it: data/train.jsonl and data/test.jsonl."""
    data = tmp_path / "ds" / "data"
    data.mkdir(parents=True)
    for split, rows in (("train", TEXTS), ("test", TEXTS[:1])):
        lines = [json.dumps({"body": t, "id": i}) for i, t in enumerate(rows)]
        (data / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path / "ds"


def test_hf_source_names_and_splits():
    assert parse_hf_source("hf:org/name") == ("org/name", "train")
    assert parse_hf_source("hf:/data/owt@validation") == ("/data/owt", "validation")
    with pytest.raises(ConfigError, match="source"):
        parse_hf_source("hf:")
    with pytest.raises(ConfigError, match="not a folder"):
        resolve_source("hf:/no/such/dataset")


def test_local_dataset_streams_its_rows_in_order(local_dataset):
    corpus = resolve_source(f"hf:{local_dataset}", text_field="body")
    assert isinstance(corpus, HFDatasetCorpus) and list(corpus.documents()) == TEXTS
    test_split = resolve_source(f"hf:{local_dataset}@test", text_field="body")
    assert list(test_split.documents()) == TEXTS[:1]
    assert "split=test field=body" in test_split.description


def test_missing_column_names_the_columns(local_dataset):
    with pytest.raises(ConfigError, match="text-field.*body, id"):
        list(resolve_source(f"hf:{local_dataset}").documents())


def test_dataset_to_shards_gives_the_tokenizer_ids(local_dataset, tmp_path):
    tok = Gpt2Tokenizer()
    corpus = resolve_source(f"hf:{local_dataset}", text_field="body")
    prepare(corpus, tok, tmp_path / "shards", shard_tokens=8)
    want = [i for t in TEXTS for i in [*tok.encode(t), tok.eot_id]]
    assert open_shards(tmp_path / "shards", tok).tokens().tolist() == want
