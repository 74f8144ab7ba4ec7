"""The block sweep: every cell recorded, failures become statuses and the sweep goes on."""

import pytest
import torch

import accelbench.workloads.block.runner as block_mod
from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.recording.recorder import Recorder
from accelbench.config.presets import get_preset
from accelbench.config.record_kinds import metric_names
from accelbench.hardware.environment import environment
from accelbench.store.store import ResultStore
from accelbench.workloads.block.runner import BlockSpec, run_block_sweep


def _spec(**changes):
    base = dict(model=get_preset("gpt2-tiny"), seq_len=32, batches=(1, 2), dtypes=("fp32",),
                device="cpu", repeats=3, warmup=1)
    base.update(changes)
    return BlockSpec(**base)


def _recorder(tmp_path):
    return Recorder(ResultStore(tmp_path / "r.db"), environment(torch.device("cpu")))


@pytest.mark.slow
def test_ok_cells_have_metrics_and_raw_times(tmp_path):
    recorder = _recorder(tmp_path)
    outcomes = run_block_sweep(_spec(), recorder)
    assert [o.status for o in outcomes] == ["ok", "ok"]
    m = outcomes[1].metrics
    assert len(outcomes[1].raw["forward"]) == 3 and len(outcomes[1].raw["backward"]) == 3
    assert m["forward_backward_flops"] == pytest.approx(3 * m["forward_flops"])
    t = m["forward_time_s_median"]
    assert m["forward_tflops_per_device"] == pytest.approx(m["forward_flops"] / t / 1e12)
    assert m["forward_tokens_per_s_per_device"] == pytest.approx(2 * 32 / t)
    assert m["peak_label"].startswith("measured peak") and 0 < m["forward_backward_mfu"]
    assert m["mem_peak_bytes_per_rank"][0] >= m["mem_base_bytes_per_rank"][0] > 0
    assert m["mem_added_bytes_per_rank_max"] == (m["mem_peak_bytes_per_rank"][0]
                                                 - m["mem_base_bytes_per_rank"][0])
    assert m["mem_added_max_rank"] == 0 and m["tokens_per_step_global"] == 2 * 32
    assert m["peak_flops_per_s_per_device"] > 0 and m["mem_estimate_bytes_per_rank"] > 0
    peaks = [r for r in recorder.store.query() if r.kind == "peak"]
    stored = [r for r in recorder.store.query() if r.kind == "block"]
    assert len(peaks) == 1 and m["peak_flops_per_s_per_device"] == peaks[0].metrics[
        "peak_flops_per_s_per_device"] and f"record {peaks[0].id}" in m["peak_label"]
    assert len(stored) == 2 and stored[1].metrics == m and stored[1].schema_version == 2
    assert all(tuple(o.metrics) == metric_names("block") for o in outcomes)


@pytest.mark.slow
def test_oom_and_unsupported_are_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    real_time_block = block_mod.time_block

    def failing_time_block(cfg, seq_len, batch, dtype, device, spec):
        if batch == 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_time_block(cfg, seq_len, batch, dtype, device, spec)

    monkeypatch.setattr(block_mod, "time_block", failing_time_block)
    monkeypatch.setattr(block_mod, "dtype_support",
                        lambda device, name: "no fp16 here" if name == "fp16" else None)
    recorder = _recorder(tmp_path)
    outcomes = run_block_sweep(_spec(batches=(1, 2, 4), dtypes=("fp32", "fp16")), recorder)
    statuses = [(o.spec["dtype"], o.spec["batch"], o.status) for o in outcomes]
    assert statuses == [("fp32", 1, "ok"), ("fp32", 2, "oom"), ("fp32", 4, "ok"),
                        ("fp16", 1, "unsupported"), ("fp16", 2, "unsupported"),
                        ("fp16", 4, "unsupported")]
    assert "out of memory" in outcomes[1].reason
    stored = [r for r in recorder.store.query() if r.kind == "block"]
    assert [r.status for r in stored] == [s for _, _, s in statuses]
    assert [r.spec["dtype"] for r in recorder.store.query() if r.kind == "peak"] == ["fp32"]


def test_cpu_refuses_before_allocating_when_the_estimate_exceeds_the_limit(tmp_path, monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("a refused cell must not allocate")

    monkeypatch.setattr(block_mod, "time_block", must_not_run)
    outcomes = run_block_sweep(_spec(mem_limit_bytes=1000), _recorder(tmp_path))
    assert all(o.status == "oom" and "before allocating" in o.reason for o in outcomes)
    m = outcomes[0].metrics
    assert tuple(m) == metric_names("block") and m["mem_estimate_bytes_per_rank"] > 1000
    assert [k for k, v in m.items() if v is not None] == ["mem_estimate_bytes_per_rank"]


def test_error_in_one_cell_is_recorded(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("something else broke")

    monkeypatch.setattr(block_mod, "time_block", broken)
    given = (SweepPeak("fp32", 1e11, "fp32", "given"),)  # no GEMM peak measured (~10 s here)
    outcomes = run_block_sweep(_spec(batches=(1,), peaks=given), _recorder(tmp_path))
    assert outcomes[0].status == "error" and "something else broke" in outcomes[0].reason
