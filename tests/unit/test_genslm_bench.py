"""GenSLM workload: codon shards from FASTA, training on the shipped genomes, longest sequence."""

import gzip
import json
import math
import sys

import numpy as np
import pytest

from accelbench.bench.bisection import largest_that_fits
from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.cell import estimate_bytes
from accelbench.bench.train.fit_search import ONE_DEVICE
from accelbench.bench.train.search import SEARCH_KIND, find_longest_seq, run_longest_seq_sweep
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.cli.main import main
from accelbench.config.presets import get_preset, resolve_model
from accelbench.data.codon import CodonTokenizer
from accelbench.data.defaults import ensure_default_shards
from accelbench.data.fasta import builtin_genomes, read_fasta
from accelbench.data.shard_format import open_shards
from accelbench.data.tokenizer import get_tokenizer
from accelbench.hardware.detect import resolve_device

SEP = 2  # GenSLM's [SEP], the document separator
GIB = 2**30


@pytest.fixture(autouse=True)
def _data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELBENCH_DATA_HOME", str(tmp_path / "data-home"))


def _cli(monkeypatch, capsys, *args):
    """Run `accelbench ARGS`; returns (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["accelbench", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def _documents(tokens):
    """Split a token stream at [SEP] (each document ends with one)."""
    docs, current = [], []
    for t in tokens.tolist():
        if t == SEP:
            docs.append(current)
            current = []
        else:
            current.append(t)
    assert current == []
    return docs


def test_prepare_genome_round_trip(tmp_path, monkeypatch, capsys):
    reference = builtin_genomes()[0]
    sequence = read_fasta(reference)[0].sequence
    for frame in (0, 1):
        out = tmp_path / f"frame{frame}"
        code, _, err = _cli(monkeypatch, capsys, "data", "prepare", "--genome", str(reference),
                            "--frame", str(frame), "--out", str(out), "--no-progress")
        assert code == 0, err
        shards = open_shards(out, CodonTokenizer(frame))
        (doc,) = _documents(shards.tokens())
        assert len(doc) == 9967  # 29,903 nt: 9,967 whole codons in frame 0 and in frame 1
        usable = (len(sequence) - frame) // 3 * 3
        assert CodonTokenizer(frame).decode(doc) == sequence[frame: frame + usable].upper()
    with pytest.raises(Exception, match="frame=1"):  # another frame's shards are refused
        open_shards(tmp_path / "frame1", CodonTokenizer(0))


def test_prepare_gzipped_records_are_documents(tmp_path, monkeypatch, capsys):
    path = tmp_path / "two.fa"  # gzip is recognised by its bytes, not the name
    path.write_bytes(gzip.compress(b">a\r\nacgTTT\r\nGg\r\n>empty\r\n>b\nNNNaaa\n"))
    out = tmp_path / "shards"
    code, _, err = _cli(monkeypatch, capsys, "data", "prepare", "--genome", str(path), "--out",
                        str(out), "--no-progress")
    assert code == 0, err
    docs = _documents(open_shards(out, CodonTokenizer()).tokens())
    tok = CodonTokenizer()
    assert [tok.decode(d) for d in docs] == ["ACGTTT", "NNNAAA"]  # empty record skipped


def test_default_data_with_codon_tokenizer_is_the_shipped_genomes():
    shards = ensure_default_shards(get_tokenizer("codon"))
    records = [r for path in builtin_genomes() for r in read_fasta(path, skip_empty=True)]
    assert len(records) == 11
    assert shards.total_tokens == sum(len(r.sequence) // 3 + 1 for r in records)
    assert "genomes:builtin" in json.loads((shards.directory / "index.json").read_text())["source"]


@pytest.mark.slow
def test_genslm_trains_on_the_shipped_genomes_and_loss_falls(monkeypatch, capsys, tmp_path):
    code, out, err = _cli(
        monkeypatch, capsys, "genslm", "--model", "genslm-25m:layers=2", "--seq", "128",
        "--micro-batch", "4", "--dtype", "fp32", "--steps", "16", "--warmup-steps", "1",
        "--lr", "3e-3", "--device", "cpu", "--db", str(tmp_path / "r.db"), "--json", "--quiet")
    assert code == 0, err
    peak, record = json.loads(out)  # the sweep's measured CPU peak, then its one cell
    assert peak["kind"] == "peak" and record["kind"] == "train"
    assert record["status"] == "ok" and record["spec"]["token_unit"] == "codon"
    assert record["spec"]["benchmark"] == "genslm"
    assert record["spec"]["tokenizer"] == "codon" and record["spec"]["data"] == "default"
    assert record["spec"]["model"]["n_layer"] == 2 and record["spec"]["model"]["d_model"] == 512
    loss = record["raw"]["rank0"]["loss"]
    assert loss[0] == pytest.approx(math.log(69), abs=0.15)  # untrained: uniform over 69 ids
    first, last = sum(loss[:4]) / 4, sum(loss[-4:]) / 4
    assert last < first - 0.2
    # What a model learns first is codon frequency: the shards' unigram entropy (about 4.00 nats).
    tokens = ensure_default_shards(get_tokenizer("codon")).tokens()
    p = np.bincount(tokens, minlength=69) / len(tokens)
    entropy = float(-(p[p > 0] * np.log(p[p > 0])).sum())
    assert last == pytest.approx(entropy, abs=0.2)
    assert "codons/s" in err


@pytest.mark.parametrize("threshold,multiple,start,limit", [
    (1, 1, 1, 4096), (777, 1, 1, 4096), (4096, 1, 1, 4096), (5000, 1, 1, 4096),
    (1599, 64, 256, 1 << 20), (100, 64, 256, 1 << 20), (10, 64, 256, 1 << 20),
    (20000, 64, 1024, 10240),
])
def test_bisection_matches_brute_force(threshold, multiple, start, limit):
    search = largest_that_fits(lambda v: v <= threshold, start=start, limit=limit,
                               multiple=multiple)
    brute = max((v for v in range(multiple, limit + 1, multiple) if v <= threshold), default=0)
    assert search.largest == brute
    values = [v for v, _ in search.probes]
    assert len(values) == len(set(values))  # no length probed twice


def test_longest_seq_on_cpu_is_the_largest_that_the_estimate_fits():
    spec = TrainSpec(model=resolve_model("genslm-25m:layers=2"), data="synthetic",
                     tokenizer="codon", dtypes=("fp32",), device="cpu",
                     mem_limit_bytes=int(1.5 * GIB))
    probes = []
    seq, search = find_longest_seq(spec, TrainCell(256, 1, 1, "fp32", "none"),
                                   resolve_device("cpu"), probes.append)
    assert search["method"] == "estimate" and seq % 64 == 0 and seq >= 256
    assert estimate_bytes(spec, TrainCell(seq, 1, 1, "fp32", "none"), ONE_DEVICE) <= 1.5 * GIB
    assert estimate_bytes(spec, TrainCell(seq + 64, 1, 1, "fp32", "none"), ONE_DEVICE) > 1.5 * GIB
    assert search["tried"][str(seq + 64)] is False and search["tried"][str(seq)] is True
    assert [o.kind for o in probes] == [SEARCH_KIND] * len(search["tried"])
    assert [o.status == "ok" for o in probes] == list(search["tried"].values())


def test_learned_positions_limit_the_search_and_the_chosen_length_is_measured():
    model = get_preset("gpt2-tiny").with_changes(vocab_size=69, n_positions=512)
    spec = TrainSpec(model=model, data="default", tokenizer="codon", seq_lens=(128,),
                     micro_batches=(1,), dtypes=("fp32",), steps=2, warmup_steps=1,
                     device="cpu", peaks=(SweepPeak("fp32", 1e11, "fp32", "given"),))
    outcomes = []  # a peak given (no GEMM peak measured: ~10 s on 2 cores, tested elsewhere)
    run_longest_seq_sweep(spec, outcomes.append)
    probes, (cell,) = outcomes[:-1], outcomes[-1:]
    assert [o.spec["seq_len"] for o in probes] == [128, 256, 512]
    assert cell.kind == "train" and cell.status == "ok" and cell.spec["seq_len"] == 512
    assert cell.spec["seq_search"]["limit_reason"] == "learned positions (n_positions)"


@pytest.mark.parametrize("args,message", [
    (["data", "prepare", "--genome", "default", "--frame", "3"], "error: frame: unknown reading"),
    (["data", "prepare", "--genome", "/no/such.fasta", "--out", "x"], "error: genome: no such"),
    (["data", "prepare", "--source", "default", "--genome", "default"], "error: source: give"),
    (["genslm", "--frame", "3"], "error: frame: unknown reading frame 3"),
    (["genslm", "--seq", "128,256", "--longest-seq"], "error: seq: the longest-sequence"),
    (["genslm", "--nproc", "2", "--longest-seq"], "error: longest-seq: the search runs on one"),
])
def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, args, message):
    code, _, err = _cli(monkeypatch, capsys, *args)
    assert code == 2 and err.startswith(message) and err.count("\n") == 1


def test_genslm_has_every_train_option():
    import inspect

    from accelbench.cli.options import workload_command
    from accelbench.cli.workloads import run_sweep
    from accelbench.config.workload import get_workload

    train, genslm = (workload_command(get_workload(n), run_sweep) for n in ("train", "genslm"))
    train_options = set(inspect.signature(train).parameters)
    genslm_options = set(inspect.signature(genslm).parameters)
    assert train_options <= genslm_options
    assert genslm_options - train_options == {"frame", "longest_seq"}
