"""A training step's own costs outside its layers (issue 17, T4): the loss, embedding and
optimizer micro-benchmarks count what they run, their curves round-trip through the store,
and the step model uses them when a profile has them and is unchanged without them."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from accelbench.analytics.activations import Kernels
from accelbench.analytics.cluster import make_cluster
from accelbench.analytics.comm import dp_bytes_per_rank
from accelbench.analytics.efficiency import BuiltinRates, ProfileRates, layer_cost
from accelbench.analytics.kernels import (
    ADAMW_BYTES_PER_PARAM,
    embedding_bytes,
    loss_bytes,
    optimizer_bytes,
)
from accelbench.analytics.machine_profile import Curve, MachineProfile
from accelbench.analytics.measured_step_runs import predict_step_s, profile_device
from accelbench.analytics.model_states import stage_params
from accelbench.analytics.step_comm import DDP_BUCKET_BYTES
from accelbench.analytics.steptime import estimate_step
from accelbench.analytics.train_setup import TrainSetup
from accelbench.config.layout import Layout
from accelbench.config.model import ModelConfig
from accelbench.report.stored_profile import load_profile
from accelbench.store.store import ResultStore
from accelbench.workloads.calibrate.options import CalibrateOptions, build_calibrate_spec
from accelbench.workloads.calibrate.overheads import (
    measure_embedding,
    measure_loss,
    measure_optimizer,
    optimizer_update,
    parameter_shapes,
)
from tests.unit.cli_run import run_main

TINY = ModelConfig("tiny", 1, 2, 32, 97, 64)  # layers, heads, width, vocab, positions
SMALL = ModelConfig("small", 2, 8, 512, 1000, 256)
CPU = torch.device("cpu")


def test_bytes_per_call_are_the_hand_counts():
    # loss: 6 fp32 values per logit (log-softmax read+write, zero fill, backward read 2 write 1)
    assert loss_bytes(3, 5, 4) == 3 * 5 * 6 * 4 == 360
    # bf16 logits add the cast to fp32 and the gradient's cast back: read 2 + write 4, x 2
    assert loss_bytes(3, 5, 2) == 3 * 5 * (24 + 12) == 540
    # gather 2 x 4 x 3, backward: fill 10 x 3, scatter-add 3 x 4 x 3; tied: add 3 x 10 x 3
    assert embedding_bytes(4, 10, 3, tied=False) == (24 + 30 + 36) * 4 == 360
    assert embedding_bytes(4, 10, 3, tied=True) == (24 + 30 + 36 + 90) * 4 == 720
    # norm read 4, clip read+write 8, AdamW 28 per fp32 parameter
    assert optimizer_bytes(10) == 10 * (4 + 8 + 28) == 400


def _spec(**options):
    spec = build_calibrate_spec(CalibrateOptions(repeats=2, warmup=1, **options), "cpu")
    return replace(spec, model=TINY)


def test_each_micro_benchmark_times_the_calls_it_counts():
    spec = _spec(tokens="8,16", optimizer_params="1000,3000")
    loss = measure_loss(spec, CPU, "bf16")
    assert [p.work for p in loss] == [loss_bytes(8, 97, 2), loss_bytes(16, 97, 2)]
    assert {p.curve for p in loss} == {"loss:bf16"} and all(p.size == p.work for p in loss)
    emb = measure_embedding(spec, CPU)
    assert [p.work for p in emb] == [embedding_bytes(t, 97, 32, True) for t in (8, 16)]
    assert emb[0].label == "embedding 8 of 97x32 tied" and emb[0].samples == 2
    opt = measure_optimizer(spec, CPU)
    assert [p.work for p in opt] == [optimizer_bytes(1000), optimizer_bytes(3000)]
    assert opt[0].shape["tensors"] == len(parameter_shapes(TINY, 1000))
    assert all(p.time_s_median > 0 for p in loss + emb + opt)


def test_parameter_shapes_are_a_layers_tensors_up_to_the_count():
    # one layer of TINY: qkv 96x32 + 96, out 32x32 + 32, MLP 128x32 + 128, 32x128 + 32, 2 norms
    layer = 96 * 32 + 96 + 32 * 32 + 32 + 128 * 32 + 128 + 32 * 128 + 32 + 32 + 32
    shapes = parameter_shapes(TINY, layer + 100)
    assert len(shapes) == 11 and shapes[10] == (100,)  # the 11th cut to what is left
    assert sum(math.prod(s) for s in shapes) == layer + 100


def test_the_optimizer_call_clips_to_norm_one_then_steps():
    call, kernel, module = optimizer_update([(4, 3), (5,)], CPU)
    before = [p.detach().clone() for p in module]
    call()
    norm = torch.linalg.vector_norm(torch.cat([p.grad.reshape(-1) for p in module]))
    assert norm.item() == pytest.approx(1.0, rel=1e-5)  # clipped in place to the max norm
    assert all(not torch.equal(a, p) for a, p in zip(before, module, strict=True))
    assert kernel in ("fused", "foreach")


def test_the_new_curves_round_trip_through_the_store(monkeypatch, capsys, tmp_path):
    db = tmp_path / "p.db"
    code, out, err = run_main(
        monkeypatch, capsys, "calibrate", "--device", "cpu", "--ops",
        "loss,embedding,optimizer", "--dtype", "fp32", "--model", "gpt2-tiny", "--tokens",
        "16,64", "--optimizer-params", "10K,40K", "--threads", "1", "--repeats", "2",
        "--warmup", "1", "--db", str(db))
    assert code == 0, err
    [record] = ResultStore(db).query(kind="profile")
    points = record.metrics["points"]
    assert len(points) == 2 + 2 + 2
    profile = load_profile(ResultStore(db, write=False))
    assert sorted(profile.curves) == ["embedding:fp32", "loss:fp32", "optimizer:adamw"]
    opt = next(p for p in points if p["shape"].get("params") == 10_000)
    assert opt["work"] == optimizer_bytes(10_000) == 400_000
    assert profile.optimizer_time_s(10_000) == pytest.approx(opt["time_s_median"])
    loss = next(p for p in points if p["curve"] == "loss:fp32" and p["shape"]["tokens"] == 64)
    assert profile.loss_time_s("fp32", 64, 50257) == pytest.approx(loss["time_s_median"])


def _profile(**extra: Curve) -> MachineProfile:
    """GEMMs at 0.4 of a 1e13 peak, attention 0.3, copy 1e11 B/s; `extra` curves added."""
    flat = Curve((1e6,), (0.4,))
    return MachineProfile("cpu", "test", "made here", {"fp32": 1e13}, {"fp32": "given"},
                          {"gemm:fp32:forward": flat, "gemm:fp32:input_grad": flat,
                           "gemm:fp32:weight_grad": flat,
                           "attention:fp32:forward:d64": Curve((128,), (0.3,)),
                           "attention:fp32:backward:d64": Curve((128,), (0.3,)),
                           "memory:copy": Curve((1e6,), (1e11,)), **extra})


OVERHEADS = {"loss:fp32": Curve((1e6, 1e9), (1e9, 4e9)),
             "embedding:fp32": Curve((1e6,), (2e9,)),
             "optimizer:adamw": Curve((1e6,), (5e9,))}


def test_the_step_model_adds_the_measured_loss_and_embedding_to_the_head():
    plain = layer_cost(ProfileRates(_profile(), "fp32"), SMALL, 256, 2, 1, 1, False, "fp32",
                       True)
    rich = layer_cost(ProfileRates(_profile(**OVERHEADS), "fp32"), SMALL, 256, 2, 1, 1, False,
                      "fp32", True)
    tokens = 512
    loss_b = loss_bytes(tokens, 1000, 4)  # 12.3 MB: between the loss curve's sizes
    loss_rate = 1e9 + 3e9 * math.log(loss_b / 1e6) / math.log(1e3)
    emb_b = embedding_bytes(tokens, 1000, 512, True) + embedding_bytes(tokens, 256, 512, False)
    assert rich.head - plain.head == pytest.approx(loss_b / loss_rate + emb_b / 2e9)
    assert rich.model == plain.model  # the layers themselves are untouched
    builtin = BuiltinRates(1e13, 1e13, 0.5, 0.5, 1e12)
    assert builtin.head_extra_s(SMALL, tokens, 1) == 0.0  # built-in curves: no such term


def _step(profile: MachineProfile, layout: Layout, model: ModelConfig = SMALL):
    cluster = replace(make_cluster(profile_device(profile), 1, devices_per_node=2),
                      profile=profile)
    setup = TrainSetup(2 * layout.dp, 256, "fp32", overlap="none",
                       kernels=Kernels(dropout=False))
    return estimate_step(model, cluster, setup, layout)


def test_the_optimizer_is_the_measured_update_else_adamw_counted_as_measured():
    n = stage_params(SMALL, 1, 1, "first", layers=SMALL.n_layer)
    with_update = _step(_profile(**OVERHEADS), Layout(mb=2))
    assert with_update.optimizer_s == pytest.approx(optimizer_bytes(n) / 5e9)
    adamw = _step(_profile(**{"memory:adamw": Curve((1e6,), (7e9,))}), Layout(mb=2))
    assert adamw.optimizer_s == pytest.approx(ADAMW_BYTES_PER_PARAM * n / 7e9)
    # without either curve: the bandwidth formula (no datasheet bandwidth: 1000 GB/s x 0.8)
    plain = _step(_profile(), Layout(mb=2))
    assert plain.optimizer_s == pytest.approx(n * (4 + 4 + 2 * 8) / (1000e9 * 0.8))
    assert with_update.compute_s > plain.compute_s  # the head's loss and embedding


def test_ddp_reduces_the_gradients_in_25_mib_buckets_with_a_profile():
    big = ModelConfig("big", 4, 8, 1024, 1000, 256)  # 4 layers of 12.6M: 201 MB fp32
    comm_curve = Curve((1e3, 1e9), (1e8, 1e10))
    profile = _profile(**{"collective:all_reduce": comm_curve})
    profile = replace(profile, latency_s={"all_reduce": 1e-3}, collective_ranks=2)
    grads = stage_params(big, 1, 1, "first", layers=big.n_layer) * 4
    buckets = math.ceil(grads / DDP_BUCKET_BYTES)
    assert buckets == 8
    per_op = dp_bytes_per_rank(grads, 2, 0, 1, 1) / buckets
    message = per_op  # all-reduce on 2 ranks: ring volume 2(n-1)/n = 1 x the message
    busbw = 1e8 + (1e10 - 1e8) * math.log(message / 1e3) / math.log(1e6)
    step = _step(profile, Layout(dp=2, mb=2), big)
    assert step.dp_comm_exposed_s == pytest.approx(buckets * max(1e-3, per_op / busbw))


def test_this_machines_cells_are_predicted_with_nothing_overlapped():
    profile = replace(_profile(**{"collective:all_reduce": Curve((1e3,), (1e9,))}),
                      latency_s={"all_reduce": 1e-4}, collective_ranks=2)
    run = {"kind": "train", "model": SMALL, "seq_len": 256, "micro_batch": 2, "gas": 1,
           "dtype": "fp32", "n_devices": 2, "layout": {"dp": 2}, "threads": 1}
    step = _step(profile, Layout(dp=2, mb=2))  # overlap none
    assert predict_step_s(run, profile) == pytest.approx(step.step_s)
    assert step.dp_comm_exposed_s > 0


@pytest.mark.slow
def test_concurrent_compute_points_come_from_launched_ranks(monkeypatch, capsys, tmp_path):
    """--concurrent: the compute benchmarks run on both launched ranks at once, one thread
    each, and rank 0's points make the profile (what a launched training rank sees)."""
    db = tmp_path / "c.db"
    code, out, err = run_main(
        monkeypatch, capsys, "calibrate", "--device", "cpu", "--concurrent", "--ops",
        "loss,optimizer", "--dtype", "fp32", "--model", "gpt2-tiny", "--tokens", "16",
        "--optimizer-params", "10K", "--repeats", "2", "--warmup", "1", "--db", str(db))
    assert code == 0, err
    [record] = ResultStore(db).query(kind="profile")
    assert record.spec["concurrent"] is True and record.metrics["threads"] == 1
    assert record.reason.startswith("compute on 2 ranks at once (rank 0's times)")
    assert sorted(p["curve"] for p in record.metrics["points"]) == ["loss:fp32",
                                                                     "optimizer:adamw"]
    loss = next(p for p in record.metrics["points"] if p["curve"] == "loss:fp32")
    assert loss["work"] == loss_bytes(16, 50257, 4) and loss["samples"] == 2


def test_concurrent_with_more_threads_is_one_line_and_exit_2(monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, "calibrate", "--concurrent", "--threads", "2")
    assert code == 2 and out == ""
    assert err.strip() == ("error: threads: --concurrent runs one thread a rank, got 2 "
                           "(allowed: 1 (or leave it out) with --concurrent)")
