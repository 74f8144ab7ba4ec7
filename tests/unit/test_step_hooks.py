"""The runner's one feature seam (bench/train/hooks.py): a hook registered for a cell is called
at each point of the build and the steps, in order, and its result reaches the rank's result."""

import pytest
import torch

import accelbench.bench.train.hooks as hooks_mod
from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.hooks import Float8Hook, MoEHook, SparsityHook, StepHook, hooks_for
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.layout import Layout
from accelbench.config.presets import get_preset

TINY = get_preset("gpt2-tiny").with_changes(vocab_size=512, n_positions=64)
GIVEN = (SweepPeak("fp32", 1e11, "fp32", "given"),)


def _spec(**changes):
    base = dict(model=TINY, seq_lens=(32,), micro_batches=(2,), dtypes=("fp32",), steps=3,
                warmup_steps=1, device="cpu", peaks=GIVEN)
    return TrainSpec(**{**base, **changes})


class ToyHook(StepHook):
    """Writes down every call it gets."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def built(self, model):
        self.calls.append("built" if next(model.parameters()).device.type == "cpu" else "?")

    def prepare(self, model, device):
        self.calls.append("prepare")

    def placed(self, module):
        self.calls.append("placed")

    def timed(self):
        self.calls.append("timed")

    def after_optimizer_step(self, trainer):
        assert trainer.hook(ToyHook) is self
        self.calls.append("after_optimizer_step")

    def result(self, device):
        self.calls.append("result")
        return {"sparse_kernel_reason": "toy"}  # a RankResult field, by name


def test_a_registered_hook_sees_its_calls_in_order(monkeypatch):
    calls: list[str] = []
    toy = lambda spec, cell, layout, precision, device: ToyHook(calls)  # noqa: E731
    monkeypatch.setattr(hooks_mod, "FEATURE_HOOKS", (*hooks_mod.FEATURE_HOOKS, toy))
    out = run_train_sweep(_spec(), lambda o: None)
    assert out[0].status == "ok"
    assert calls == ["built", "prepare", "placed", "after_optimizer_step", "timed",
                     "after_optimizer_step", "after_optimizer_step", "result"]


def test_hooks_follow_the_cell():
    cpu = torch.device("cpu")

    def kinds(spec, cell):
        return [type(h) for h in hooks_for(spec, cell, Layout(), spec.precision(cell, "cpu"), cpu)]
    assert kinds(_spec(), TrainCell(32, 2, 1, "fp32", "none", 0.0)) == []
    assert kinds(_spec(), TrainCell(32, 2, 1, "fp32", "none", 0.8)) == [SparsityHook]
    moe = _spec(model=TINY.with_changes(n_experts=4))
    assert kinds(moe, TrainCell(32, 2, 1, "fp8", "none", 0.5)) == [SparsityHook, Float8Hook,
                                                                    MoEHook]


def test_two_hooks_setting_one_field_is_an_error():
    class Twice(StepHook):
        def result(self, device):
            return {"moe_load": None}
    with pytest.raises(ValueError, match="moe_load"):
        hooks_mod.hook_results((Twice(), Twice()), torch.device("cpu"))
