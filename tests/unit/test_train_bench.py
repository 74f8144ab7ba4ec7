"""The training benchmark: metrics from real steps, divergence, refusals, bad input."""

import math

import pytest

import accelbench.bench.train.steps as steps_mod
from accelbench.analytics.flops import model_flops_per_token
from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.build import build_trainer
from accelbench.bench.train.cell import estimate_bytes
from accelbench.bench.train.fit_search import ONE_DEVICE, find_max_micro_batch
from accelbench.bench.train.spec import (
    TrainCell,
    TrainSpec,
    resolve_model_source,
    validate_train_spec,
)
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset
from accelbench.config.record_kinds import metric_names
from accelbench.hardware.detect import resolve_device

TINY = get_preset("gpt2-tiny").with_changes(vocab_size=512, n_positions=64)
# A peak given, as a datasheet's would be: the CPU's GEMM peak takes ~10 s to measure on 2 busy
# cores; the tests of the measured peak ask for it with peaks=()
GIVEN = (SweepPeak("fp32", 1e11, "fp32", "given"), SweepPeak("fp16", 1e11, "fp16", "given"))


def _spec(**changes):
    base = dict(model=TINY, seq_lens=(32,), micro_batches=(2,), dtypes=("fp32",), steps=4,
                warmup_steps=1, device="cpu", peaks=GIVEN)
    base.update(changes)
    return TrainSpec(**base)


@pytest.mark.slow
def test_metrics_follow_from_the_measured_steps():
    outcomes = run_train_sweep(_spec(gas=(2,), recomputes=("none", "full")), lambda o: None)
    assert [o.status for o in outcomes] == ["ok", "ok"]
    for o in outcomes:
        m, raw = o.metrics, o.raw["rank0"]
        assert set(m) == set(metric_names("train"))
        assert len(raw["step_times_s"]) == 4 and m["timed_steps"] == 3
        assert m["tokens_per_step_global"] == 2 * 2 * 32
        assert m["tokens_per_s_global"] == pytest.approx(128 / m["step_time_s_median"])
        per_token = model_flops_per_token(TINY, 32).total
        assert m["model_flops_per_step_global"] == pytest.approx(per_token * 128)
        assert m["mfu"] == pytest.approx(m["model_flops_per_step_global"]
                                         / m["step_time_s_median"]
                                         / m["peak_flops_per_s_per_device"])
        assert m["optimizer"] == "AdamW (fused)"
        assert all(math.isfinite(v) for v in raw["loss"])
    assert outcomes[0].metrics["hfu"] == pytest.approx(outcomes[0].metrics["mfu"])
    assert outcomes[1].metrics["hfu"] > outcomes[1].metrics["mfu"]


@pytest.mark.slow
def test_nan_loss_is_recorded_as_diverged_with_its_step(monkeypatch):
    real_step = steps_mod._forward_backward
    calls = []

    def poisoned(*args, **kwargs):
        calls.append(1)
        loss = real_step(*args, **kwargs)
        return loss * float("nan") if len(calls) == 3 else loss

    monkeypatch.setattr(steps_mod, "_forward_backward", poisoned)
    outcomes = run_train_sweep(_spec(steps=6), lambda o: None)
    diverged = outcomes[0]
    assert diverged.status == "diverged" and diverged.metrics["diverged_step"] == 3  # 1-based
    assert "at step 3" in diverged.reason
    assert len(diverged.raw["rank0"]["loss"]) == 3
    assert diverged.metrics["mem_estimate_bytes_per_rank"] > 0


@pytest.mark.slow
def test_fp16_uses_loss_scaling_and_runs():
    outcome = run_train_sweep(_spec(dtypes=("fp16",), steps=2, warmup_steps=0),
                              lambda o: None)[0]
    assert outcome.status == "ok", outcome.reason


@pytest.mark.slow
def test_cell_that_does_not_fit_is_refused_and_the_sweep_goes_on():
    sink = []
    outcomes = run_train_sweep(_spec(micro_batches=(1, 100000), mem_limit_bytes=int(3e9),
                                     peaks=()), sink.append)
    assert [o.status for o in outcomes] == ["ok", "oom"]
    assert "before allocating" in outcomes[1].reason
    assert [o.kind for o in sink] == ["peak", "train", "train"]


@pytest.mark.slow
def test_a_cpu_sweep_measures_its_peak_once_and_every_cell_divides_by_it():
    """The peak of a device without a datasheet figure is its own record, measured once per
    dtype per sweep with its spread, and every cell's MFU of that dtype is divided by it."""
    sink = []
    run_train_sweep(_spec(micro_batches=(1, 2), gas=(1, 2), steps=2, warmup_steps=1, peaks=()),
                    sink.append)
    peaks = [o for o in sink if o.kind == "peak"]
    cells = [o for o in sink if o.kind == "train"]
    assert len(peaks) == 1 and len(cells) == 4
    p = peaks[0].metrics
    assert p["repetitions"] == 5 == len(peaks[0].raw["flops_per_s"])
    assert p["peak_flops_per_s_min"] <= p["peak_flops_per_s_median"]
    assert p["peak_flops_per_s_median"] <= p["peak_flops_per_s_per_device"]
    assert {c.metrics["peak_flops_per_s_per_device"] for c in cells} == {
        p["peak_flops_per_s_per_device"]}
    assert len({c.metrics["peak_label"] for c in cells}) == 1


def test_max_micro_batch_on_cpu_comes_from_the_estimate():
    spec = _spec(mem_limit_bytes=int(2e9))
    cell = TrainCell(32, 1, 1, "fp32", "none")
    mb, search = find_max_micro_batch(spec, cell, resolve_device("cpu"))
    assert search["method"] == "estimate" and mb >= 1
    assert estimate_bytes(spec, TrainCell(32, mb, 1, "fp32", "none"), ONE_DEVICE) <= 2e9
    assert estimate_bytes(spec, TrainCell(32, mb + 1, 1, "fp32", "none"), ONE_DEVICE) > 2e9


@pytest.mark.parametrize("changes,message", [
    ({"seq_lens": (128,)}, "seq: 128 is longer than the model's 64 positions"),
    ({"gas": (0,)}, "gas: must be at least 1"),
    ({"dtypes": ("fp64",)}, "dtype: unknown value 'fp64'"),
    ({"recomputes": ("some",)}, "recompute: unknown value 'some'"),
    ({"warmup_steps": 4}, "warmup-steps: must be in [0, steps)"),
    ({"grad_clip": -1.0}, "grad-clip: must be 0 or more"),
    ({"weight_decay": -5.0}, "weight-decay: must be 0 or more"),
    ({"lr_warmup_steps": -1}, "lr-warmup-steps: must be 0 or more"),
    ({"lr": float("nan")}, "lr: must be a finite number"),
    ({"time_budget_s": float("inf")}, "time-budget: must be a finite number"),
    ({"cell_timeout_s": 0.0}, "cell-timeout: must be a positive number"),
    ({"benchmark": "bert"}, "benchmark: unknown value 'bert'"),
])
def test_bad_input(changes, message):
    with pytest.raises(ConfigError) as err:
        validate_train_spec(_spec(**changes))
    assert str(err.value).startswith(message)


@pytest.mark.slow
def test_training_starts_from_a_hugging_face_checkpoint(tmp_path):
    transformers = pytest.importorskip("transformers")
    import torch

    config = transformers.GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=2,
                                     n_head=4)
    hf = transformers.GPT2LMHeadModel(config)
    hf.save_pretrained(tmp_path)
    cfg, checkpoint = resolve_model_source(f"hf:{tmp_path}")
    assert (cfg.n_layer, cfg.d_model, cfg.vocab_size) == (2, 64, 512)
    spec = TrainSpec(cfg, seq_lens=(32,), micro_batches=(2,), dtypes=("fp32",), steps=2,
                     warmup_steps=0, device="cpu", init_checkpoint=checkpoint, lr=1e-12,
                     peaks=GIVEN)
    trainer = build_trainer(spec, spec.cells()[0], ONE_DEVICE, torch.device("cpu"))
    torch.testing.assert_close(trainer.module.wte.weight, hf.transformer.wte.weight)
    assert run_train_sweep(spec, lambda o: None)[0].status == "ok"


@pytest.mark.slow
def test_loss_falls_over_20_steps_on_the_default_corpus(tmp_path, monkeypatch):
    """A tiny GPT-2-vocabulary model learns real text: the last steps' loss is well below the
    first's (random init starts near ln(50257) = 10.8; by step 14 it is near 7, 1 below the
    bound, and flat to step 30)."""
    monkeypatch.setenv("ACCELBENCH_DATA_HOME", str(tmp_path / "data"))
    model = get_preset("gpt2-tiny").with_changes(n_positions=64)
    spec = TrainSpec(model, data="default", seq_lens=(64,), micro_batches=(8,), dtypes=("fp32",),
                     steps=20, warmup_steps=1, lr=3e-3, lr_warmup_steps=5, device="cpu",
                     peaks=GIVEN, trials=1)  # learning is the point: one trial, not auto's 3
    outcome = run_train_sweep(spec, lambda o: None)[0]
    assert outcome.status == "ok", outcome.reason
    losses = outcome.raw["rank0"]["loss"]
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert first > 10.0 and last < first - 2.5, (first, last)
    assert outcome.metrics["data_wait_fraction"] < 0.5


def test_shards_from_another_tokenizer_vocabulary_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELBENCH_DATA_HOME", str(tmp_path / "data"))
    with pytest.raises(ConfigError, match="tokenizer gpt2 has 50257 ids"):
        run_train_sweep(_spec(data="default", steps=2, warmup_steps=0), lambda o: None)


@pytest.mark.parametrize("problem", ["missing", "corrupt"])
def test_missing_or_corrupt_shards_stop_before_running(tmp_path, problem):
    from accelbench.data.corpus import IterableCorpus
    from accelbench.data.shards import prepare
    from accelbench.data.tokenizer import get_tokenizer

    folder = tmp_path / "shards"
    prepare(IterableCorpus(["some real text to tokenize"] * 50), get_tokenizer("gpt2"), folder,
            shard_tokens=100, progress=False)
    shard = sorted(folder.glob("*.bin"))[0]
    if problem == "missing":
        shard.unlink()
    else:
        shard.write_bytes(b"\x00" * shard.stat().st_size)
    model = get_preset("gpt2-tiny").with_changes(n_positions=64)
    with pytest.raises(ConfigError):
        run_train_sweep(TrainSpec(model, data=str(folder), seq_lens=(16,), micro_batches=(1,),
                                  dtypes=("fp32",), steps=2, warmup_steps=0, device="cpu"),
                        lambda o: None)


def test_bad_shards_on_the_command_line_stop_before_a_results_file_exists(tmp_path, monkeypatch,
                                                                          capsys):
    """One line, exit 2, and no banner or database first: the data is checked with the spec."""
    import sys

    from accelbench.cli.main import main

    db = tmp_path / "r.db"
    monkeypatch.setattr(sys, "argv", ["accelbench", "train", "--model", "gpt2-tiny", "--seq", "64",
                                      "--data", str(tmp_path / "absent"), "--db", str(db)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    out = capsys.readouterr()
    assert exit_info.value.code == 2 and not db.exists() and out.out == ""
    assert len(out.err.strip().splitlines()) == 1 and out.err.startswith("error: data")
