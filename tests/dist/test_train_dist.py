"""`accelbench train` on several processes: launched cells, layouts, timeouts, bad layouts."""

import pytest

from accelbench.bench.train import run_train_sweep
from accelbench.bench.train_spec import TrainSpec
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset

pytestmark = pytest.mark.dist
TINY = get_preset("gpt2-tiny").with_changes(n_layer=2, vocab_size=1024, n_positions=64)


def _spec(**changes):
    base = dict(model=TINY, seq_lens=(32,), micro_batches=(2,), gas=(2,), dtypes=("fp32",),
                steps=3, warmup_steps=1, device="cpu", nproc=2, cell_timeout_s=600)
    base.update(changes)
    return TrainSpec(**base)


@pytest.mark.parametrize("layout", ["dp=2", "tp=2", "pp=2,schedule=1f1b", "dp=2,zero=3"])
def test_launched_cell_combines_the_ranks(layout):
    sink = []
    outcome = run_train_sweep(_spec(layout=layout), sink.append)[0]
    assert outcome.status == "ok", outcome.reason
    m = outcome.metrics
    dp = 2 if layout.startswith("dp") else 1
    assert m["n_devices"] == 2 and m["n_ranks"] == 2
    assert m["tokens_global"] == dp * 2 * 2 * 32  # micro-batch x gas x seq per replica
    assert m["tokens_per_s_global"] == pytest.approx(m["tokens_global"] / m["step_time_s_max"])
    assert m["tokens_per_s_per_device"] == pytest.approx(m["tokens_per_s_global"] / 2)
    assert len(m["mem_peak_bytes_per_rank"]) == 2
    assert set(outcome.raw) == {"rank0", "rank1"} and sink == [outcome]


def test_a_cell_that_overruns_is_recorded_and_the_sweep_goes_on():
    outcomes = run_train_sweep(_spec(micro_batches=(1, 2), cell_timeout_s=1.0), lambda o: None)
    assert [o.status for o in outcomes] == ["timeout", "timeout"]
    assert "timed out" in outcomes[0].reason


def test_a_layout_that_does_not_divide_stops_before_launching():
    with pytest.raises(ConfigError, match="layout"):
        run_train_sweep(_spec(layout="dp=3"), lambda o: None)


def test_scaling_study_runs_every_count_under_torchrun():
    from accelbench.bench.scale import ScaleSpec, run_scale, scaling_rows

    base = _spec(nproc=1, gas=(1,))
    outcomes = run_scale(ScaleSpec(base, (1, 2), "weak"), lambda o: None)
    assert [o.status for o in outcomes] == ["ok", "ok"]
    rows = scaling_rows(outcomes)
    assert rows[0]["speedup"] == 1.0 and rows[1]["global_batch"] == 2 * rows[0]["global_batch"]
    assert rows[1]["scaling_efficiency"] == pytest.approx(rows[1]["speedup"] / 2)
