"""Codon tokenizer: GenSLM's ids, reading frames, case, ambiguous bases, decoding."""

from __future__ import annotations

import hashlib
import json
import pickle

import pytest
from tokenizers import Tokenizer as HFTokenizer

from accelbench.config.errors import ConfigError
from accelbench.data.codon import GENSLM_VOCAB_PATH, CodonTokenizer
from accelbench.data.fasta import builtin_genomes, read_fasta
from accelbench.data.tokenizer import Tokenizer, get_tokenizer


@pytest.fixture(scope="module")
def reference() -> str:
    return read_fasta(builtin_genomes()[0])[0].sequence


@pytest.fixture(scope="module")
def hf() -> HFTokenizer:
    return HFTokenizer.from_file(str(GENSLM_VOCAB_PATH))


def test_vocabulary_is_genslms() -> None:
    tok = CodonTokenizer()
    vocab = json.loads(GENSLM_VOCAB_PATH.read_text())["model"]["vocab"]
    assert tok.vocab_size == 69 == len(vocab)
    assert [tok.unk_id, tok.cls_id, tok.sep_id, tok.pad_id, tok.mask_id] == [0, 1, 2, 3, 4]
    assert tok.eot_id == 2  # [SEP] separates genomes
    assert tok.encode("GGC") == [5] and tok.encode("TAG") == [68]


def test_reference_start_codons(reference: str) -> None:
    tok = CodonTokenizer()
    # ATT AAA GGT TTA TAC CTT CCC AGG TAA CAA, ids read by hand from GenSLM's file.
    assert tok.codons(reference)[:10] == ["ATT", "AAA", "GGT", "TTA", "TAC",
                                          "CTT", "CCC", "AGG", "TAA", "CAA"]
    assert tok.encode(reference)[:10] == [23, 16, 17, 46, 35, 36, 42, 64, 65, 49]
    assert len(tok.encode(reference)) == 29903 // 3 == 9967


def test_reading_frames(reference: str) -> None:
    assert CodonTokenizer(1).codons(reference)[:3] == ["TTA", "AAG", "GTT"]
    assert CodonTokenizer(2).codons(reference)[:3] == ["TAA", "AGG", "TTT"]
    assert [len(CodonTokenizer(f).encode(reference)) for f in (0, 1, 2)] == [9967, 9967, 9967]
    assert CodonTokenizer(1).encode("AATGCCCG") == CodonTokenizer().encode("ATGCCC")
    assert CodonTokenizer(2).encode("AATGCCCG") == CodonTokenizer().encode("TGCCCG")
    assert CodonTokenizer(2).encode("AC") == []
    with pytest.raises(ConfigError, match="reading frame"):
        CodonTokenizer(3)


def test_same_ids_as_hugging_face(reference: str, hf: HFTokenizer) -> None:
    genomes = [reference] + [r.sequence for r in read_fasta(builtin_genomes()[1])[:3]]
    for frame in (0, 1, 2):
        tok = CodonTokenizer(frame)
        for seq in genomes:
            assert tok.encode(seq) == hf.encode(" ".join(tok.codons(seq))).ids


def test_lower_case_and_rna(hf: HFTokenizer) -> None:
    tok = CodonTokenizer()
    assert tok.encode("atgccc") == tok.encode("ATGCCC") == [10, 42]
    assert hf.encode("atg ccc").ids == [0, 0]  # what GenSLM's users lost: lower case -> [UNK]
    assert tok.encode("AUGuuu") == tok.encode("ATGTTT")


def test_ambiguous_bases_and_trailing_codon() -> None:
    tok = CodonTokenizer()
    assert tok.encode("ATGNNNAANCCC") == [10, 0, 0, 42]
    for code in "NRYKMSWBDHV-*.":
        for pos in range(3):
            codon = "AAA"[:pos] + code + "AAA"[pos + 1 :]
            assert tok.encode(codon) == [tok.unk_id], codon
            assert tok.encode(codon.lower()) == [tok.unk_id], codon
    assert tok.encode("ATGC") == [10] and tok.encode("ATGCC") == [10]
    assert tok.encode("") == [] and tok.encode("AT") == []
    assert tok.encode("ATG CCC\nttt\r\n") == tok.encode("ATGCCCTTT")  # GenSLM's spaced form too


def test_decode_round_trip(reference: str) -> None:
    for frame in (0, 1, 2):
        tok = CodonTokenizer(frame)
        whole = (len(reference) - frame) // 3 * 3
        assert tok.decode(tok.encode(reference)) == reference[frame : frame + whole]
    tok = CodonTokenizer()
    assert tok.decode(tok.encode("atgNNNacguuu")) == "ATGNNNACGTTT"
    assert tok.decode([1, 10, 3, 0, 4, 2, 3]) == "ATGNNNNNN"  # [CLS]/[PAD]/[SEP] vanish
    with pytest.raises(ValueError, match="outside the codon vocabulary"):
        tok.decode([10, 69])
    with pytest.raises(ValueError, match="outside the codon vocabulary"):
        tok.decode([-1])


def test_protocol_identity_and_registry() -> None:
    tok = get_tokenizer("codon")
    assert isinstance(tok, Tokenizer) and isinstance(tok, CodonTokenizer)
    sha = hashlib.sha256(GENSLM_VOCAB_PATH.read_bytes()).hexdigest()
    assert sha in tok.identity and "frame=0" in tok.identity
    assert get_tokenizer("codon-frame1").identity != tok.identity
    assert tok.encode_batch(["ATG", "cccAA"]) == [[10], [42]]
    clone = pickle.loads(pickle.dumps(tok))
    assert clone.identity == tok.identity and clone.encode("GGCTAG") == [5, 68]
