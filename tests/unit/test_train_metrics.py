"""The one metrics builder: several ranks and one device through the same arithmetic."""

from __future__ import annotations

import pytest

from accelbench.bench.gemm_peak import Peak
from accelbench.bench.train.cell_metrics import cell_counts, cell_metrics, step_report
from accelbench.bench.train.rank_result import RankResult
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.config.layout import Layout
from accelbench.config.presets import get_preset
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.train import TrainMetrics

TINY = get_preset("gpt2-tiny")
CELL = TrainCell(seq_len=32, micro_batch=2, gas=2, dtype="fp32", recompute="none")
SPEC = TrainSpec(TINY, seq_lens=(32,), micro_batches=(2,), gas=(2,), dtypes=("fp32",),
                 steps=4, warmup_steps=1)
PEAK = Peak(1e12, "fp32", "test peak")


def _rank(rank: int, median_s: float, peak: int, base: int) -> RankResult:
    times = [9.0] + [median_s] * 3  # the warm-up step is slow and left out
    return RankResult(rank=rank, step_time_s=median_s, step_times_s=times,
                      loss=[5.0, 4.0, 3.0, 2.0], data_wait_s=[0.0, 0.01, 0.01, 0.01],
                      mem_peak_bytes=peak, mem_base_bytes=base, mem_method="sampled RSS",
                      optimizer="AdamW (fused)")


def test_throughput_is_global_tokens_over_the_slowest_rank_never_an_average():
    """dp=2 x tp=2: two replicas of 2 x 2 x 32 tokens a step; the slowest rank takes 2 s."""
    layout = Layout(dp=2, tp=2)
    counts = cell_counts(SPEC, CELL, layout, PEAK)
    ranks = [_rank(0, 1.0, 10, 0), _rank(1, 2.0, 50, 10), _rank(2, 1.5, 20, 0),
             _rank(3, 1.0, 5, 0)]
    m = metrics_dict(cell_metrics(SPEC, CELL, layout, counts, ranks, 1e6, "gloo"))
    assert m["tokens_per_step_global"] == 2 * 2 * 2 * 32
    assert m["step_time_s_median"] == 2.0 and m["step_time_slowest_rank"] == 1
    assert m["tokens_per_s_global"] == 256 / 2.0  # not the mean of the ranks' rates
    assert m["tokens_per_s_per_device"] == 256 / 2.0 / 4
    assert m["step_time_s_median_per_rank"] == [1.0, 2.0, 1.5, 1.0]
    assert m["mem_peak_bytes_per_rank"] == [10, 50, 20, 5]
    assert m["mem_added_bytes_per_rank_max"] == 40 and m["mem_added_max_rank"] == 1
    assert m["mfu"] == pytest.approx(counts.model_flops_per_step_global / 4 / 2.0 / 1e12)
    assert set(m) == set(metrics_dict(TrainMetrics()))


def test_one_device_is_the_one_rank_case():
    counts = cell_counts(SPEC, CELL, Layout(), PEAK)
    m = metrics_dict(cell_metrics(SPEC, CELL, Layout(), counts, [_rank(0, 0.5, 30, 10)], 1e6,
                                  "none"))
    assert m["n_devices"] == 1 and m["tokens_per_s_global"] == m["tokens_per_s_per_device"]
    assert m["tokens_per_s_global"] == pytest.approx(128 / 0.5)
    assert m["mem_added_bytes_per_rank_max"] == 20 and m["timed_steps"] == 3
    assert m["comm_bytes_per_step_per_rank"]["comm_bytes_per_step"] == 0
    report = step_report(counts, 2, 4, 0.5, 4.0, 1e-4, 0.01, 20)
    assert report.tokens_per_s_global == m["tokens_per_s_global"]
    assert report.mfu == pytest.approx(m["mfu"])
