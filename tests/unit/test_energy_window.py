"""The energy window brackets exactly the timed steps: a real gpt2-tiny training run and a
block benchmark on this CPU, metered by a counter source built from recorded readings (this
machine has none), with the step loop's heartbeat telling where each edge was read."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
from energy_replay import ReplayCounter

import accelbench.bench.train.steps as steps_mod
from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.presets import get_preset
from accelbench.config.record_kinds import metric_names
from accelbench.hardware.energy import set_source_factory
from accelbench.workloads.block.runner import BlockOptions, build_block_spec, run_block_sweep

TINY = get_preset("gpt2-tiny").with_changes(vocab_size=512, n_positions=64)
GIVEN = (SweepPeak("fp32", 1e11, "fp32", "given"),)  # no CPU GEMM peak measured (~10 s)
WATTS = 50.0


class EdgeLog(ReplayCounter):
    """A 50 W recorded counter that notes the step loop's last heartbeat at each reading the
    main thread makes (the window's edges; the sampler thread reads in between)."""

    def __init__(self, beats: list[tuple[int, str]]) -> None:
        start = time.perf_counter()
        super().__init__([(start, 0.0), (start + 3600, WATTS * 3600)])
        self.beats, self.edges = beats, []

    def read_j(self) -> tuple[float, ...]:
        if threading.current_thread() is threading.main_thread():
            self.edges.append(self.beats[-1] if self.beats else None)
        return super().read_j()


@pytest.fixture
def metered(monkeypatch):
    """Every meter opened reads an EdgeLog; the heartbeat records (step, phase)."""
    beats: list[tuple[int, str]] = []
    sources: list[EdgeLog] = []

    def factory(device):
        sources.append(EdgeLog(beats))
        return sources[-1]

    set_source_factory(factory)
    steps_mod.set_heartbeat(lambda step, phase: beats.append((step, phase)))
    yield sources
    set_source_factory(None)
    steps_mod.set_heartbeat(None)


def test_the_window_opens_after_warm_up_and_closes_after_the_last_step(metered):
    spec = TrainSpec(model=TINY, seq_lens=(32,), micro_batches=(2,), dtypes=("fp32",),
                     steps=5, warmup_steps=2, device="cpu", peaks=GIVEN)
    outcome = run_train_sweep(spec, lambda o: None)[0]
    assert outcome.status == "ok"
    (source,) = metered
    # opened as step 3 (the first timed one) begins, closed once step 5 is done; no other
    # main-thread reading: the warm-up steps 1 and 2 are outside
    assert source.edges == [(3, "data"), (5, "loss all-reduce")]
    assert source.closed
    m = outcome.metrics
    assert set(m) == set(metric_names("train"))
    timed_s = sum(outcome.raw["rank0"]["step_times_s"][2:])
    assert m["energy_window_s"] >= timed_s  # the window holds every timed step
    assert m["energy_source"] == "replay" and m["energy_j_per_rank"] == [m["energy_j"]]
    # the replay source's joules run on its own clock reads, the window on the meter's: on a
    # loaded machine the two can lie a few ms apart (0.3% of a 1 s window was seen), so 1%
    assert m["energy_j"] == pytest.approx(WATTS * m["energy_window_s"], rel=1e-2)
    tokens = m["tokens_per_step_global"] * 3
    assert m["energy_per_token_j"] == pytest.approx(m["energy_j"] / tokens)
    assert m["tokens_per_j"] == pytest.approx(tokens / m["energy_j"])
    assert m["avg_power_w_per_device"] == [pytest.approx(WATTS, rel=1e-2)]


def test_the_block_benchmark_meters_its_timed_repetitions(metered):
    spec = build_block_spec(BlockOptions(model="gpt2-tiny", seq=16, batch="1", dtype="fp32",
                                         repeats=3, warmup=2, device="cpu"))
    spec = dataclasses.replace(spec, peaks=GIVEN)
    (outcome,) = [o for o in run_block_sweep(spec, lambda o: None) if o.kind == "block"]
    m = outcome.metrics
    assert set(m) == set(metric_names("block"))
    assert len(metered[-1].edges) == 2  # opened and closed once, around the timed loop
    assert m["energy_window_s"] >= 3 * m["forward_backward_time_s_min"]
    assert m["energy_per_token_j"] == pytest.approx(m["energy_j"] / (16 * 3))
    assert m["energy_window_too_short"] is (m["energy_window_s"] < 1.0)
