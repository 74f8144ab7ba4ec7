"""accelbench calibrate: each micro-benchmark's FLOPs and bytes per call against hand counts and
torch's FlopCounterMode, the profile curves' interpolation, the profile's round trip through the
real SQLite store, and bad options refused in one line (exit 2) before anything runs."""

from __future__ import annotations

import math
import statistics

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from accelbench.analytics.kernels import (
    attention_bytes,
    attention_flops,
    bus_factor,
    collective_elements,
    gemm_bytes,
    gemm_flops,
    layer_gemm_shapes,
    pass_shape,
    stream_bytes,
)
from accelbench.analytics.machine_profile import Curve, MachineProfile, Point, make_curve
from accelbench.analytics.params import block_matmul_params
from accelbench.config.errors import ConfigError
from accelbench.config.presets import resolve_model
from accelbench.config.record_kinds import metric_names
from accelbench.report.stored_profile import load_profile
from accelbench.report.table import key_figure
from accelbench.store.store import ResultStore
from accelbench.workloads.calibrate.options import CalibrateOptions, build_calibrate_spec
from tests.unit.cli_run import run_main


def _counted(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def test_gemm_flops_and_bytes_are_the_hand_counts():
    assert gemm_flops(3, 4, 5) == 2 * 3 * 4 * 5 == 120
    assert gemm_bytes(3, 4, 5, 2) == (3 * 4 + 4 * 5 + 3 * 5) * 2
    x, w = torch.randn(96, 64), torch.randn(80, 64)  # F.linear: (96 x 64) @ (64 x 80)
    assert _counted(lambda: F.linear(x, w)) == gemm_flops(96, 64, 80)


def test_the_backward_products_of_a_linear_layer_cost_its_forward():
    x, w = torch.randn(96, 64, requires_grad=True), torch.randn(80, 64, requires_grad=True)
    y = F.linear(x, w)  # (96 x 64) @ (64 x 80)
    backward = _counted(lambda: y.backward(torch.randn_like(y)))
    assert pass_shape("input_grad", 96, 64, 80) == (96, 80, 64)  # dy @ w
    assert pass_shape("weight_grad", 96, 64, 80) == (80, 96, 64)  # dy.T @ x
    assert backward == sum(gemm_flops(*pass_shape(p, 96, 64, 80))
                           for p in ("input_grad", "weight_grad")) == 2 * gemm_flops(96, 64, 80)


def test_layer_gemm_shapes_are_gpt2s_and_sum_to_the_flops_formula():
    cfg = resolve_model("gpt2")
    assert layer_gemm_shapes(cfg, 512) == (("qkv", 512, 768, 2304), ("attn_out", 512, 768, 768),
                                           ("mlp_up", 512, 768, 3072),
                                           ("mlp_down", 512, 3072, 768))
    per_token = sum(gemm_flops(m, k, n) for _, m, k, n in layer_gemm_shapes(cfg, 1))
    assert per_token == 2 * block_matmul_params(cfg)  # analytics/flops.py's 2N per token


def test_layer_gemm_shapes_of_grouped_query_and_swiglu():
    cfg = resolve_model("custom:layers=1,heads=8,hidden=512,ffn=1024").with_changes(
        n_kv_head=2, activation="swiglu")
    shapes = dict((name, (m, k, n)) for name, m, k, n in layer_gemm_shapes(cfg, 10))
    assert shapes["qkv"] == (10, 512, 512 + 2 * 2 * 64)  # 2 key/value heads of 64
    assert shapes["mlp_up"] == (10, 512, 2 * 1024)  # gate and input matrices
    assert shapes["mlp_down"] == (10, 1024, 512)


def test_attention_flops_are_the_hand_count_and_flop_counters():
    b, h, s, d = 2, 3, 64, 16
    assert attention_flops(b, h, s, d, "forward") == 4 * b * h * s * s * d
    assert attention_flops(b, h, s, d, "backward") == 8 * b * h * s * s * d
    q, k, v = (torch.randn(b, h, s, d, requires_grad=True) for _ in range(3))
    with sdpa_kernel(SDPBackend.MATH):  # the decomposed kernel FlopCounterMode can count
        forward = _counted(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        backward = _counted(lambda: out.backward(torch.randn_like(out)))
    assert forward == attention_flops(b, h, s, d, "forward")
    assert backward == attention_flops(b, h, s, d, "backward")
    assert attention_bytes(b, h, s, d, 2, "forward") == 4 * b * h * s * d * 2
    assert attention_bytes(b, h, s, d, 2, "backward") == 8 * b * h * s * d * 2


def test_stream_bytes_are_the_hand_counts():
    assert stream_bytes("copy", 1000, 4) == 8000  # read once, written once
    assert stream_bytes("adamw", 1000, 4) == 28000  # 4 fp32 tensors read, 3 written
    with pytest.raises(ConfigError, match="op"):
        stream_bytes("triad", 10, 4)


def test_bus_factors_and_buffers_follow_nccl_tests():
    assert bus_factor("all_reduce", 4) == 1.5 and bus_factor("all_reduce", 2) == 1.0
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert bus_factor(op, 4) == 0.75
    assert bus_factor("send_recv", 8) == 1.0
    assert collective_elements("all_gather", 1 << 20, 4, 4) == (1 << 16, 1 << 18)
    assert collective_elements("reduce_scatter", 1 << 20, 4, 4) == (1 << 18, 1 << 16)
    assert collective_elements("all_reduce", 1000, 4, 3) == (249, 249)  # a multiple of ranks


def test_curve_interpolates_on_log_size_and_clamps():
    curve = Curve((1e3, 1e5, 1e6), (0.2, 0.6, 0.8))
    assert curve.at(1e3) == 0.2 and curve.at(1e5) == 0.6 and curve.at(1e6) == 0.8
    assert curve.at(1e4) == pytest.approx(0.4)  # halfway on log(size)
    assert curve.at(math.sqrt(1e5 * 1e6)) == pytest.approx(0.7)
    assert curve.at(1.0) == 0.2 and curve.at(1e12) == 0.8  # clamped at both ends
    assert make_curve([(10, 1.0), (10, 3.0), (10, 2.0), (1, 5.0)]) == Curve((1, 10), (5.0, 2.0))
    for sizes in ((2.0, 1.0), (1.0, 1.0), (0.0, 1.0)):
        with pytest.raises(ValueError):
            Curve(sizes, (1.0, 1.0))


def _point(op: str, curve: str, dtype: str, size: float, work: float, time_s: float,
           **shape) -> Point:
    return Point(op, curve, "", dtype, size, work, time_s, time_s, time_s, 0.0, 5, shape)


def test_profile_lookups_predict_times_from_the_curves():
    profile = MachineProfile(
        "cuda", "test", "made here", {"bf16": 1e15}, {"bf16": "datasheet dense"},
        {"gemm:bf16:forward": Curve((1e9, 1e12), (0.25, 0.75)),
         "attention:bf16:forward:d128": Curve((1024, 8192), (0.4, 0.6)),
         "collective:all_reduce": Curve((1e6, 1e9), (1e10, 1e11))},
        latency_s={"all_reduce": 5e-5}, collective_ranks=8)
    flops = gemm_flops(1024, 1024, 1024)  # 2.1e9 FLOPs, between the curve's sizes
    eff = 0.25 + 0.5 * math.log(flops / 1e9) / math.log(1e3)
    assert profile.gemm_time_s("bf16", 1024, 1024, 1024) == pytest.approx(flops / (eff * 1e15))
    assert profile.attention_efficiency("bf16", "forward", 4096, 64) == pytest.approx(
        0.4 + 0.2 * math.log(4) / math.log(8))  # the nearest head size measured: 128
    # 1 GB on 8 ranks: algbw = busbw / (2*7/8); a 10-byte message: the latency
    assert profile.collective_time_s("all_reduce", 1e9) == pytest.approx(1e9 / (1e11 / 1.75))
    assert profile.collective_time_s("all_reduce", 10) == 5e-5
    # the same bus bandwidth on 2 ranks: algbw = busbw / 1
    assert profile.collective_time_s("all_reduce", 1e9, ranks=2) == pytest.approx(1e9 / 1e11)
    with pytest.raises(ConfigError, match="profile: has no curve 'gemm:fp32:forward'"):
        profile.gemm_efficiency("fp32", 1e9)


@pytest.mark.slow
def test_a_calibration_round_trips_through_the_store(monkeypatch, capsys, tmp_path):
    db = tmp_path / "p.db"
    code, out, err = run_main(
        monkeypatch, capsys, "calibrate", "--device", "cpu", "--ops", "gemm,attention,memory",
        "--dtype", "fp32", "--model", "gpt2-tiny", "--tokens", "64,256", "--seq", "32,64",
        "--memory-sizes", "64KiB,256KiB", "--threads", "1", "--repeats", "3", "--warmup", "1",
        "--db", str(db))
    assert code == 0, err
    assert "gemm:fp32:weight_grad" in out and "memory:adamw" in out
    [record] = ResultStore(db).query(kind="profile")
    assert record.status == "ok" and set(record.metrics) == set(metric_names("profile"))
    assert record.environment["device_type"] == "cpu"
    assert key_figure(record).startswith("profile: 32 points, GEMM ")  # results list
    points = record.metrics["points"]
    # 2 token counts x 4 layer GEMMs x 3 passes, 2 sequences x 2 directions, 2 ops x 2 sizes
    assert len(points) == 2 * 4 * 3 + 2 * 2 + 2 * 2
    profile = load_profile(ResultStore(db, write=False))
    peak = record.metrics["peak_flops_per_s_by_dtype"]["fp32"]
    assert record.metrics["peak_label_by_dtype"]["fp32"].startswith("measured peak (GEMM")
    assert "1 thread(s)" in record.metrics["peak_label_by_dtype"]["fp32"]  # as the points ran
    assert record.metrics["threads"] == 1 and record.spec["threads"] == 1
    gemm = next(p for p in points if p["label"] == "mlp_up weight_grad 512x256x128")
    assert gemm["work"] == gemm_flops(512, 256, 128) == gemm_flops(256, 128, 512)
    assert profile.gemm_efficiency("fp32", gemm["size"], "weight_grad") == pytest.approx(
        _median_at(points, "gemm:fp32:weight_grad", gemm["size"]) / peak)
    copy = next(p for p in points if p["curve"] == "memory:copy" and p["size"] == 2 * 65536)
    assert profile.memory_bytes_per_s("copy", 2 * 65536) == pytest.approx(copy["rate_per_s"])
    assert profile.attention_efficiency("fp32", "backward", 64, 32) > 0
    assert sorted(profile.curves) == [
        "attention:fp32:backward:d32", "attention:fp32:forward:d32", "gemm:fp32:forward",
        "gemm:fp32:input_grad", "gemm:fp32:weight_grad", "memory:adamw", "memory:copy"]


def _median_at(points: list[dict], curve: str, size: float) -> float:
    """What make_curve keeps at a size: the median rate of the points measured there (mlp_up and
    mlp_down have the same FLOPs)."""
    return statistics.median(p["rate_per_s"] for p in points
                             if p["curve"] == curve and p["size"] == size)


def test_ranks_beyond_the_accelerators_are_refused(monkeypatch):
    monkeypatch.setattr("accelbench.hardware.device.device_count", lambda kind: 2)
    with pytest.raises(ConfigError, match="nproc: 4 ranks need 4 cuda devices, this machine has 2"):
        build_calibrate_spec(CalibrateOptions(nproc=4), "cuda")
    on_gpu = build_calibrate_spec(CalibrateOptions(), "cuda")
    assert on_gpu.nproc == 2 and on_gpu.tokens == (128, 512, 2048, 8192)  # every device, larger
    assert on_gpu.message_bytes[-1] == 256 * 2**20
    quick = build_calibrate_spec(CalibrateOptions(quick=True), "cuda")
    assert quick.tokens == (128, 512) and quick.seqs == (128, 256)
    assert build_calibrate_spec(CalibrateOptions(nproc=4), "cpu").nproc == 4  # cores shared


def test_no_profile_in_a_store_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="profile: no machine profile in"):
        load_profile(ResultStore(tmp_path / "none.db", write=False))


@pytest.mark.parametrize(("args", "line"), [
    (("--ops", "gemm,fft"), "error: ops: unknown value 'fft' (allowed: gemm, attention, memory, "
                            "loss, embedding, optimizer, collective)"),
    (("--dtype", "fp64"), "error: dtype: unknown value 'fp64'"),
    (("--gemm-passes", "forward,dw"), "error: gemm-passes: unknown value 'dw'"),
    (("--tokens", "0,128"), "error: tokens: must be positive, got 0"),
    (("--seq", "128,,256"), "error: seq: empty item in '128,,256'"),
    (("--memory-sizes", "12XB"), "error: memory-sizes: cannot read size '12XB'"),
    (("--message-sizes", "4KiB,4096"), "error: message-sizes: a size given twice"),
    (("--collectives", "broadcast"), "error: collectives: unknown value 'broadcast'"),
    (("--nproc", "1"), "error: nproc: collectives need 2 processes or more, got 1"),
    (("--repeats", "0"), "error: repeats: must be at least 1, got 0"),
    (("--threads", "-1"), "error: threads: must be 0 or more, got -1"),
    (("--model", "gpt9"), "error: model"),
])
def test_bad_options_are_one_line_and_exit_2(monkeypatch, capsys, tmp_path, args, line):
    db = tmp_path / "never.db"
    code, out, err = run_main(monkeypatch, capsys, "calibrate", "--device", "cpu", *args,
                              "--db", str(db))
    assert code == 2 and out == ""
    assert err.startswith(line) and err.count("\n") == 1, err
    assert not db.exists()
