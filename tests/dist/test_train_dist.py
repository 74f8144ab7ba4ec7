"""`accelbench train` on several processes: launched cells, layouts, timeouts, bad layouts.

The launched-cell checks of tp=2, pp=2 and ZeRO-3 read the sparse cells of
tests/dist/test_sparsity_dist.py (one launch each, shared; how ranks are combined into a record
does not depend on the masks), dp=2 a dense cell of its own that measures the peak."""

import math

import pytest

from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.spec import TrainSpec, resolve_model_source
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset
from tests.dist.test_sparsity_dist import sparse_cell

# one test process runs this module and test_sparsity_dist.py (their shared cells), one 2-rank
# launch at a time, beside the "dist" group's launches (tests/conftest.py)
pytestmark = [pytest.mark.dist, pytest.mark.xdist_group("dist-2ranks")]
TINY = get_preset("gpt2-tiny").with_changes(n_layer=2, vocab_size=1024, n_positions=64)
# A peak given, as a datasheet's would be: measuring the GEMM peak costs ~10 s a sweep on this
# CPU and is tested once (test_launched_cell_combines_the_ranks, its first layout)
GIVEN_PEAKS = (SweepPeak("fp32", 1e11, "fp32", "given"), SweepPeak("fp16", 1e11, "fp16", "given"))
MEASURED_PEAK_LAYOUT = "dp=2"


def _spec(**changes):
    base = dict(model=TINY, seq_lens=(32,), micro_batches=(2,), gas=(2,), dtypes=("fp32",),
                steps=3, warmup_steps=1, device="cpu", nproc=2, cell_timeout_s=600,
                peaks=GIVEN_PEAKS, trials=1)  # one launch a cell, but where trials are tested
    base.update(changes)
    return TrainSpec(**base)


@pytest.mark.parametrize("layout", [MEASURED_PEAK_LAYOUT, "tp=2", "pp=2,schedule=1f1b",
                                    "dp=2,zero=3"])
def test_launched_cell_combines_the_ranks(layout):
    measured = layout == MEASURED_PEAK_LAYOUT  # the parent measures the peak, as a CPU run does
    if measured:
        sink = []
        outcome = run_train_sweep(_spec(layout=layout, peaks=()), sink.append)[0]
    else:  # test_sparsity_dist.py's cell of this layout (a given peak), launched once for both
        outcome, sink = sparse_cell(layout)
    assert outcome.status == "ok", outcome.reason
    m = outcome.metrics
    dp = 2 if layout.startswith("dp") else 1
    assert m["n_devices"] == 2 and len(m["step_time_s_median_per_rank"]) == 2
    assert m["tokens_per_step_global"] == dp * 2 * 2 * 32  # micro-batch x gas x seq a replica
    assert m["step_time_s_median"] == max(m["step_time_s_median_per_rank"])
    assert m["tokens_per_s_global"] == pytest.approx(m["tokens_per_step_global"]
                                                     / m["step_time_s_median"])
    assert m["tokens_per_s_per_device"] == pytest.approx(m["tokens_per_s_global"] / 2)
    assert m["timed_steps"] == 2 and m["few_samples"] is True
    assert m["step_time_s_min"] <= m["step_time_s_median"] <= m["step_time_s_max"]
    assert m["step_time_s_iqr"] >= 0 and m["step_time_slowest_rank"] in (0, 1)
    assert m["comm_bytes_per_step_per_rank"]["comm_bytes_per_step"] > 0
    assert "comm_bytes_per_step" in m["comm_bytes_per_step_ideal_per_rank"]
    assert len(m["mem_peak_bytes_per_rank"]) == 2
    assert set(outcome.raw) == {"rank0", "rank1"}
    assert [o.kind for o in sink] == ["peak", "train"][not measured:] and sink[-1] == outcome
    assert (m["peak_label"] == "given") is not measured
    assert outcome.spec["nproc"] == 2 and outcome.spec["world_size"] == 2


def test_a_cell_that_overruns_is_recorded_with_its_layout_and_the_sweep_goes_on(monkeypatch):
    # rank 0 holds at step 1 (bench/train/launch.py with_test_fault): no cell can finish
    # within its 3 s, however fast the machine
    monkeypatch.setenv("ACCELBENCH_TEST_FAULT", "hold:0:1")
    outcomes = run_train_sweep(_spec(micro_batches=(1, 2), cell_timeout_s=3.0, layout="tp=2"),
                               lambda o: None)
    assert [o.status for o in outcomes] == ["timeout", "timeout"]
    assert "timed out" in outcomes[0].reason
    for o in outcomes:
        assert (o.spec["layout"]["tp"], o.spec["layout"]["dp"]) == (2, 1)
        assert o.spec["world_size"] == 2 and o.spec["nproc"] == 2


def test_a_time_budget_that_ends_in_the_warm_up_is_a_timeout_on_every_rank():
    """Rank 0 decides to stop and every rank stops at the same step: no hang, no mixed steps."""
    outcome = run_train_sweep(_spec(steps=4, warmup_steps=2, time_budget_s=1e-6),
                              lambda o: None)[0]
    assert outcome.status == "timeout" and "warm-up" in outcome.reason
    assert [len(r["step_times_s"]) for r in outcome.raw.values()] == [1, 1]


def test_one_process_and_a_one_rank_launch_give_the_same_losses_and_keys():
    """One device is the one-rank layout of the same runner: the same cell run in this process
    and launched under torchrun as one rank trains the same model on the same batches."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the launched rank runs (OMP_NUM_THREADS=1)
    try:
        local = run_train_sweep(_spec(nproc=1), lambda o: None)[0]
    finally:
        torch.set_num_threads(threads)
    launched = run_train_sweep(_spec(nproc=1, layout="dp=1,zero=2"), lambda o: None)[0]
    plain = run_train_sweep(_spec(nproc=1, layout="dp=1"), lambda o: None)[0]
    assert local.status == launched.status == plain.status == "ok"
    assert set(local.metrics) == set(launched.metrics) and set(local.spec) == set(launched.spec)
    assert set(local.raw) == set(launched.raw) == {"rank0"}
    assert launched.raw["rank0"]["loss"] == pytest.approx(local.raw["rank0"]["loss"], rel=1e-5)
    assert plain.raw["rank0"]["loss"] == pytest.approx(local.raw["rank0"]["loss"], rel=1e-5)
    assert local.metrics["optimizer"] == launched.metrics["optimizer"] == "AdamW (fused)"


@pytest.mark.parametrize("layout", ["dp=2,zero=1", "dp=2,zero=3"])
def test_fp16_runs_with_loss_scaling_on_data_parallel_layouts(layout):
    outcome = run_train_sweep(_spec(layout=layout, dtypes=("fp16",)), lambda o: None)[0]
    assert outcome.status == "ok", outcome.reason
    losses = outcome.raw["rank0"]["loss"]
    assert losses == outcome.raw["rank1"]["loss"] and all(0 < x < 10 for x in losses)


def test_an_initial_checkpoint_is_loaded_on_every_rank(tmp_path):
    """tp = 2 feeds the same rows as one process: the first loss (before any update) equals
    the single-process loss from the same Hugging Face weights."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel


    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=1024,
                                    n_positions=64))
    with torch.no_grad():
        hf.transformer.wte.weight.mul_(20.0)  # far from a fresh model's loss of ln(1024)
    hf.save_pretrained(tmp_path)
    cfg, path = resolve_model_source(f"hf:{tmp_path}")
    single = run_train_sweep(_spec(model=cfg, init_checkpoint=path, steps=2, nproc=1),
                             lambda o: None)[0]
    launched = run_train_sweep(_spec(model=cfg, init_checkpoint=path, steps=2, layout="tp=2"),
                               lambda o: None)[0]
    first = single.metrics["loss_first"]
    assert abs(first - math.log(1024)) > 0.5  # not what fresh weights give
    assert launched.metrics["loss_first"] == pytest.approx(first, rel=1e-5)


def test_a_layout_that_does_not_divide_stops_before_launching():
    with pytest.raises(ConfigError, match="layout"):
        run_train_sweep(_spec(layout="dp=3"), lambda o: None)


def test_scaling_study_runs_every_count_in_every_round_under_torchrun():
    """--devices 2,1 --trials 2: four launches, both counts in each round (the baseline
    measured in every one), each count's record of its 2 trials, the speedup's verdict
    'too few samples' (an interval needs 5 trials a count)."""
    from accelbench.workloads.scale.runner import ScaleSpec, run_scale, scaling_rows

    base = _spec(nproc=1, gas=(1,), trials=2)
    outcomes = run_scale(ScaleSpec(base, (2, 1), "weak"), lambda o: None)
    assert [o.status for o in outcomes] == ["ok", "ok"], [o.reason for o in outcomes]
    for o in outcomes:
        m = o.typed
        assert m.trials == 2 and len(m.trial_positions) == 2 and m.trial_cells == 2
        assert len(o.raw["trial_values"]["tokens_per_s_global"]) == 2
        assert [sorted(r) for r in o.raw["trial_order"]] == [sorted(
            ["1 device(s), weak scaling", "2 device(s), weak scaling"])] * 2
        assert o.spec["trials"] == 2 and len(m.step_time_s_median_per_rank) == \
            o.spec["scale_devices"]
    rows = scaling_rows(outcomes)
    assert [r["devices"] for r in rows] == [1, 2] and rows[0]["baseline_devices"] == 1
    assert rows[0]["speedup"] == 1.0 and rows[1]["global_batch"] == 2 * rows[0]["global_batch"]
    assert rows[1]["scaling_efficiency"] == pytest.approx(rows[1]["speedup"] / 2)
    assert rows[1]["trials"] == 2 and rows[1]["speedup_verdict"] == "too few samples"
    assert "speedup_low" not in rows[1]


def test_launched_cells_run_their_trials_interleaved():
    """--nproc 2 --trials 2: each trial its own launch, the record rank 0's two trials
    combined (per-trial values, per-rank medians). One cell (two launches): the interleaving of
    several cells is test_train_launch's, with faked launches, and the scaling study's above."""
    sunk = []
    outcomes = run_train_sweep(_spec(micro_batches=(1,), trials=2), sunk.append)
    assert [o.status for o in outcomes] == ["ok"], [o.reason for o in outcomes]
    assert sunk == outcomes  # sunk at the end of the last round, in the sweep's order
    for o in outcomes:
        m = o.typed
        assert m.trials == 2 and m.trial_cells == 1 and len(m.trial_positions) == 2
        assert len(o.raw["trials"]) == 2 and len(m.step_time_s_median_per_rank) == 2
        values = o.raw["trial_values"]["step_time_s_median"]
        assert len(values) == 2 and m.step_time_s_median == pytest.approx(sum(values) / 2)
        assert m.tokens_per_s_global == pytest.approx(m.tokens_per_step_global
                                                      / m.step_time_s_median)
        assert all(len(r) == 1 for r in o.raw["trial_order"]) and len(o.raw["trial_order"]) == 2
        assert o.spec["trials"] == 2 and o.spec["world_size"] == 2


def test_a_length_refused_on_one_rank_fits_over_two_with_context_parallelism():
    """--mem-limit is a budget per device (a CPU rank): a length whose one-rank estimate is over
    it is refused before anything runs, and over cp=2 (half the sequence a rank) it fits each
    rank's budget and runs (one launch). The limit lies between the two estimates."""
    from accelbench.bench.train.cell import estimate_bytes
    from accelbench.config.layout import Layout

    spec = _spec(model=TINY.with_changes(n_positions=256), seq_lens=(256,), gas=(1,),
                 nproc=1, layout="dp=1")
    cell = spec.cells()[0]
    one, two = (estimate_bytes(spec, cell, Layout(cp=cp)) for cp in (1, 2))
    limit = int((one + two) / 2)
    refused = run_train_sweep(_spec(**{**vars(spec), "mem_limit_bytes": limit}),
                              lambda o: None)[0]
    assert refused.status == "oom" and refused.reason.startswith("does not fit (user budget)")
    ran = run_train_sweep(_spec(**{**vars(spec), "mem_limit_bytes": limit, "nproc": 2,
                                   "layout": "cp=2"}), lambda o: None)[0]
    assert ran.status == "ok", ran.reason
    assert ran.spec["world_size"] == 2 and ran.spec["layout"]["cp"] == 2
    assert ran.typed.mem_estimate_bytes_per_rank == pytest.approx(two)
