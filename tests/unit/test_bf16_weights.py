"""--compute-weights bf16 (bench/train/bf16_weights.py): bf16 weights kept between steps, fp32
masters in the optimizer. A real bf16 training cell on this CPU follows the fp32-weights cell's
losses within bf16's rounding; the masters stay fp32 and the weights are their bf16 rounding;
the layouts and dtypes it is not built for are one line each."""

from __future__ import annotations

import pytest
import torch

from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.bf16_weights import Bf16WeightsHook, swap_to_bf16
from accelbench.bench.train.spec import TrainSpec, validate_train_spec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset
from accelbench.models.gpt import GPT

TINY = get_preset("gpt2-tiny").with_changes(vocab_size=512, n_positions=64)
GIVEN = (SweepPeak("bf16", 1e11, "bf16", "given"),)


def _spec(**changes) -> TrainSpec:
    base = dict(model=TINY, seq_lens=(32,), micro_batches=(2,), dtypes=("bf16",), steps=5,
                warmup_steps=1, device="cpu", peaks=GIVEN, lr=3e-3, lr_warmup_steps=0,
                trials=1)
    return TrainSpec(**{**base, **changes})


def _losses(spec: TrainSpec) -> list[float]:
    (outcome,) = run_train_sweep(spec, lambda o: None)
    assert outcome.status == "ok", outcome.reason
    assert outcome.spec["compute_weights"] == spec.compute_weights  # recorded
    return outcome.raw["rank0"]["loss"]


@pytest.mark.slow
@pytest.mark.parametrize("gas", [1, 2])
def test_bf16_weights_follow_the_fp32_weights_losses_within_bf16_rounding(gas):
    """Both run bf16 matmuls on the same bf16 rounding of the same fp32 masters; what differs
    is the residual stream (bf16 from a bf16 embedding, fp32 from an fp32 one), the norms'
    weights (rounded to bf16 first) and, at gas 2, gradients summed in bf16 before the masters
    see them. The two curves are not the same (the option took effect) and stay within 0.02
    nats of each other over 5 steps (bf16's relative step is 2^-8: 0.024 at a loss of 6;
    0.0005 and 0.0004 measured here)."""
    fp32 = _losses(_spec(gas=(gas,)))
    bf16 = _losses(_spec(gas=(gas,), compute_weights="bf16"))
    gap = max(abs(a - b) for a, b in zip(fp32, bf16, strict=True))
    assert 0 < gap < 0.02, (fp32, bf16)


def test_the_masters_stay_fp32_and_the_weights_are_their_rounding():
    torch.manual_seed(0)
    model = GPT(TINY)
    originals = list(model.parameters())
    before = [p.detach().clone() for p in originals]
    optimizer = torch.optim.AdamW(originals, lr=1e-2)
    hook = Bf16WeightsHook()
    hook.placed(model)
    hook.optimizing(optimizer)
    assert model.lm_head.weight is model.wte.weight  # the tie kept: one bf16 copy
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    x = torch.randint(0, 512, (2, 16))
    _, loss = model(x, x)
    loss.backward()
    optimizer.step()  # the pre-step hook moves the bf16 gradients onto the masters
    hook.after_optimizer_step(None)
    assert all(p.grad is None for p in model.parameters())
    assert all(m.dtype == torch.float32 and m.grad is not None for m in originals)
    assert sum(not torch.equal(m, b) for m, b in zip(originals, before, strict=True)) > 20
    for weight, master in hook.pairs:
        assert torch.equal(weight, master.detach().to(torch.bfloat16))
    assert len(hook.pairs) == len(originals) == len(swap_to_bf16(GPT(TINY)))


@pytest.mark.parametrize("changes, words", [
    (dict(dtypes=("fp32",)), "bf16 weights with --dtype fp32"),
    (dict(dtypes=("bf16", "fp8"), fp8_recipe="tensorwise"), "bf16 weights with --dtype bf16,fp8"),
    (dict(sparsities=(0.5,)), "bf16 weights with --sparsity"),
    (dict(nproc=2), "bf16 weights on a launched or multi-rank layout"),
    (dict(layout="dp=1,zero=1"), "bf16 weights on a launched or multi-rank layout"),
])
def test_what_bf16_weights_do_not_run_is_one_line(changes, words):
    with pytest.raises(ConfigError) as err:
        validate_train_spec(_spec(compute_weights="bf16", **changes))
    assert str(err.value).startswith(f"compute-weights: {words}")
    assert "\n" not in str(err.value)


def test_an_unknown_compute_weights_value_is_refused():
    with pytest.raises(ConfigError, match="compute-weights: .*fp16.*allowed: fp32, bf16"):
        validate_train_spec(_spec(compute_weights="fp16"))


def test_the_estimate_counts_bf16_weights_beside_their_masters_and_the_step_s_gradients():
    """--compute-weights bf16 keeps 2 + 4 bytes of weights, 2 of gradients and 8 of moments a
    parameter, and makes the masters' 4-byte gradients at the optimizer step: 20 bytes a
    parameter then, the activations gone. gpt2 at micro-batch 1 and sequence 64 (activations
    small): that step is the peak, 2.319 GiB, as measured here (the cell's mem_added, one run,
    2-core EPYC, glibc heap in use: 2.319 GiB; the fp32-weights cell 2.016 against 1.999)."""
    from accelbench.analytics.params import total_params
    from accelbench.analytics.runtime_memory import OPTIMIZER_STEP, runtime_memory_per_device
    from accelbench.config.layout import Layout

    model = get_preset("gpt2")
    bf16 = runtime_memory_per_device(model, 64, Layout(mb=1), 1, "bf16",
                                     compute_weights="bf16")
    fp32 = runtime_memory_per_device(model, 64, Layout(mb=1), 1, "bf16")
    params = total_params(model)
    assert bf16.moment == OPTIMIZER_STEP and fp32.moment != OPTIMIZER_STEP
    assert bf16.states.params == pytest.approx(6 * params, rel=1e-3)
    assert bf16.total == pytest.approx(20 * params, rel=2e-3)
    assert bf16.total / 2**30 == pytest.approx(2.319, abs=0.01)


@pytest.mark.slow  # Dynamo compiles a model (~1.6 s)
def test_the_whole_model_compile_scope_replaces_the_blocks_compile():
    """--compile-scope model (bench/train/compile_scope.py): once placed, the blocks' compiled
    wrappers are off and the model is compiled as one graph (here with the eager backend, the
    graph capture without inductor's kernels); its loss equals the uncompiled model's; refused
    without --compile and on a multi-rank layout."""
    import accelbench.bench.train.compile_scope as scope
    from accelbench.models.gpt import compile_blocks

    torch.manual_seed(0)
    model = GPT(TINY)
    x = torch.randint(0, 512, (2, 16))
    _, eager = model(x, x)
    compile_blocks(list(model.h))
    assert all(b._compiled_call_impl is not None for b in model.h)
    scope.COMPILE_KWARGS["backend"] = "eager"
    try:
        scope.CompileScopeHook().placed(model)
    finally:
        scope.COMPILE_KWARGS.clear()
    assert all(b._compiled_call_impl is None for b in model.h)
    assert model._compiled_call_impl is not None
    _, compiled = model(x, x)
    torch.testing.assert_close(compiled, eager)
    with pytest.raises(ConfigError, match="compile-scope: model without --compile"):
        validate_train_spec(_spec(compile_scope="model"))
    with pytest.raises(ConfigError, match="compile-scope: model on a launched"):
        validate_train_spec(_spec(compile_scope="model", compile=True, nproc=2))
    validate_train_spec(_spec(compile_scope="model", compile=True))
