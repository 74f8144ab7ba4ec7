"""Weight sparsity of the training runner: masks, their upkeep, counting and bad input."""

from __future__ import annotations

import pytest
import torch

from accelbench.analytics.flops import (
    mask_bytes,
    model_flops_per_token,
    sparse_flops_per_token,
    two_four_compressed_bytes,
    two_four_skipped_flops_per_token,
)
from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.train.build import build_trainer
from accelbench.bench.train.hooks import SparsityHook
from accelbench.bench.train.spec import TrainCell, TrainSpec, validate_train_spec
from accelbench.bench.train.steps import _optimizer_step
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.bench.train.train_options import TrainOptions, build_spec
from accelbench.config.errors import ConfigError
from accelbench.config.layout import Layout
from accelbench.config.presets import get_preset
from accelbench.models.gpt import GPT
from accelbench.models.semi_structured import (
    TwoFourLinear,
    layout_problem,
    two_four_kernel_problem,
    use_two_four_kernels,
)
from accelbench.models.weight_masks import (
    SPARSE_SUFFIXES,
    is_sparse_weight,
    make_mask,
    per_matrix_sparsity,
    sparsify,
    transposable_two_four_mask,
)

TINY = get_preset("gpt2-tiny").with_changes(vocab_size=512, n_positions=64)
ONE = Layout(dp=1)
# a peak given, as a datasheet's would be (the CPU's GEMM peak: ~10 s a sweep on 2 cores)
GIVEN = (SweepPeak("fp32", 1e11, "fp32", "given"),)


def _spec(**changes):
    base = dict(model=TINY, seq_lens=(32,), micro_batches=(2,), dtypes=("fp32",), steps=4,
                warmup_steps=1, device="cpu", lr=1e-2, lr_warmup_steps=0, peaks=GIVEN)
    base.update(changes)
    return TrainSpec(**base)


def _train(spec, level, steps=5):
    """A trainer after `steps` real steps on random batches (one process)."""
    cell = TrainCell(32, 2, 1, "fp32", "none", level)
    trainer = build_trainer(spec, cell, ONE, torch.device("cpu"))
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        ids = torch.randint(0, TINY.vocab_size, (2, 33), generator=gen)
        loss = trainer.module(ids[:, :-1], ids[:, 1:])
        loss = loss[1] if isinstance(loss, tuple) else loss
        loss.backward()
        _optimizer_step(trainer, ONE, 1.0)
    return trainer


@pytest.mark.slow
@pytest.mark.parametrize("level", [0.6, 0.9])
@pytest.mark.parametrize("mask", ["magnitude", "random"])
def test_measured_sparsity_is_the_level_per_matrix_after_steps(level, mask):
    trainer = _train(_spec(sparsity_mask=mask), level)
    per_matrix = per_matrix_sparsity(trainer.module)
    assert len(per_matrix) == 4 * TINY.n_layer
    for name, fraction in per_matrix.items():
        assert fraction == pytest.approx(level, abs=1e-3), name
    dense = [p for n, p in trainer.module.named_parameters() if not is_sparse_weight(n)]
    assert all(float((p == 0).float().mean()) < 0.01 for p in dense if p.dim() == 2)
    sparse = trainer.hook(SparsityHook).state
    zeros, total = sparse.local_counts()
    assert zeros / total == pytest.approx(level, abs=1e-3)
    state = trainer.optimizer.state
    for _, param, mask_ in sparse.params:
        assert not state[param]["exp_avg"][~mask_].any()
        assert not state[param]["exp_avg_sq"][~mask_].any()


def test_magnitude_mask_keeps_the_largest_weights():
    w = torch.tensor([[0.1, -3.0, 0.2, 2.0], [5.0, 0.0, -0.3, 0.4]])
    keep = make_mask(w, 0.5, "unstructured", "magnitude", torch.Generator())
    assert keep.tolist() == [[False, True, False, True], [True, False, False, True]]


@pytest.mark.parametrize("mask", ["magnitude", "random"])
def test_two_four_mask_is_a_valid_transposable_pattern(mask):
    """2 of every 4 kept along the input dimension, and along the output dimension too (so the
    backward's W^T is 2:4 for a kernel as well)."""
    model = GPT(TINY)
    sparsify(model, 0.5, "2:4", mask, 0)
    for name, p in model.named_parameters():
        if is_sparse_weight(name):
            keep = make_mask(p, 0.5, "2:4", "magnitude", torch.Generator())
            assert torch.equal(keep, p != 0) or mask == "random"
            for matrix in (p, p.t()):
                groups = (matrix != 0).reshape(matrix.shape[0], -1, 4).sum(-1)
                assert int(groups.max()) <= 2
            assert float((p == 0).float().mean()) >= 0.5


def test_transposable_mask_keeps_the_best_tile_of_the_ninety():
    """Against brute force over every 4 x 4 tile with two per row and column."""
    import itertools

    score = torch.rand(8, 12, generator=torch.Generator().manual_seed(5))
    keep = transposable_two_four_mask(score)
    rows = [r for r in itertools.product((0, 1), repeat=4) if sum(r) == 2]
    tiles = [torch.tensor(t, dtype=torch.bool) for t in itertools.product(rows, repeat=4)
             if all(sum(c) == 2 for c in zip(*t, strict=True))]
    assert len(tiles) == 90
    for i in range(0, 8, 4):
        for j in range(0, 12, 4):
            block = score[i:i + 4, j:j + 4]
            best = max(float(block[t].sum()) for t in tiles)
            assert float(block[keep[i:i + 4, j:j + 4]].sum()) == pytest.approx(best)


def test_two_four_linear_gradients_equal_a_plain_linear():
    """The kernel path's algebra (forward through W, input gradient through W^T, dense weight
    gradient), run on this CPU with the compression left out: the same output and gradients as
    nn.functional.linear, also under bf16 autocast over fp32 weights."""
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(8, 12, generator=gen)
    w = (w * transposable_two_four_mask(w.abs())).requires_grad_()
    b = torch.randn(8, generator=gen, requires_grad=True)
    x = torch.randn(2, 3, 12, generator=gen, requires_grad=True)
    for autocast in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            ours = TwoFourLinear.apply(x, w, b, lambda t: t)
            ref = torch.nn.functional.linear(x, w, b)
        assert ours.dtype == ref.dtype
        g = torch.randn(ref.shape, generator=gen).to(ref.dtype)
        grads = torch.autograd.grad(ours, (x, w, b), g)
        ref_grads = torch.autograd.grad(ref, (x, w, b), g)
        tol = 2e-2 if autocast else 1e-6
        torch.testing.assert_close(ours, ref, rtol=tol, atol=tol)
        for mine, theirs in zip(grads, ref_grads, strict=True):
            assert mine.dtype == theirs.dtype
            torch.testing.assert_close(mine, theirs, rtol=tol, atol=tol)


def test_converted_model_routes_only_the_block_matrices():
    model = GPT(TINY)
    assert use_two_four_kernels([model], compress=lambda t: t) == 4 * TINY.n_layer
    converted = [n for n, m in model.named_modules() if "forward" in vars(m)]
    assert converted and all(is_sparse_weight(f"{n}.weight") for n in converted)


def test_two_four_kernel_reasons():
    cpu = torch.device("cpu")
    assert two_four_kernel_problem(cpu, "bf16", 1, 0, False, []) == (
        "no sparse kernel ran: masked dense on cpu (torch's 2:4 semi-structured kernels are "
        "CUDA-only)")
    assert layout_problem(1, 0, False, [(128, 64), (64, 256)]) is None
    assert layout_problem(2, 0, False, []).startswith("tp > 1")
    assert layout_problem(1, 3, False, []).startswith("zero=3")
    assert layout_problem(1, 1, True, []).startswith("torch.compile")
    assert layout_problem(1, 0, False, [(128, 64), (96, 64)]) == (
        "matrix (96, 64) (both dimensions must be multiples of 64)")


def test_two_four_skipped_flops_match_a_count():
    """Half of the masked matrices' forward and input-gradient multiplies (plus their rerun
    under full recompute, less the MLP projection early stop skips)."""
    p = sum(p.numel() for n, p in GPT(TINY).named_parameters() if is_sparse_weight(n))
    assert two_four_skipped_flops_per_token(TINY, 32, "none") == 0.5 * 4 * p
    assert two_four_skipped_flops_per_token(TINY, 32, "selective") == 0.5 * 4 * p
    mlp_proj = TINY.n_layer * TINY.ffn_dim * TINY.d_model
    assert two_four_skipped_flops_per_token(TINY, 32, "full", early_stop=True) == \
        0.5 * (6 * p - 2 * mlp_proj)


@pytest.mark.slow
def test_level_zero_gives_exactly_the_dense_losses():
    dense = run_train_sweep(_spec(), lambda o: None)[0]
    zero = run_train_sweep(_spec(sparsities=(0.0, 0.8)), lambda o: None)
    assert zero[0].raw["rank0"]["loss"] == dense.raw["rank0"]["loss"]
    assert zero[1].raw["rank0"]["loss"] != dense.raw["rank0"]["loss"]
    sparse = zero[1].metrics
    assert sparse["sparsity_measured"] == pytest.approx(0.8, abs=1e-3)
    assert zero[0].metrics["sparsity_measured"] is None
    assert sparse["sparse_kernel"] is None
    assert sparse["sparse_kernel_reason"].startswith("no sparse kernel ran: masked dense on cpu")
    assert sparse["executed_flops_per_step_global"] == sparse["hardware_flops_per_step_global"]
    dense_m = zero[0].metrics
    assert sparse["speedup_vs_dense"] == pytest.approx(dense_m["step_time_s_median"]
                                                       / sparse["step_time_s_median"])
    assert sparse["loss_last_vs_dense"] == pytest.approx(sparse["loss_last"]
                                                         - dense_m["loss_last"])
    assert sparse["loss_last_vs_dense_relative"] == pytest.approx(
        sparse["loss_last_vs_dense"] / dense_m["loss_last"])
    assert dense_m["speedup_vs_dense"] is None
    assert zero[1].spec["sparsity"] == 0.8


def test_sparse_suffixes_name_the_four_block_matrices():
    names = [n for n, _ in GPT(TINY).named_parameters() if is_sparse_weight(n)]
    assert len(names) == 4 * TINY.n_layer
    assert {n.split(".", 2)[2] for n in names} == set(SPARSE_SUFFIXES)


@pytest.mark.parametrize("changes", [
    dict(sparsities=(1.0,)), dict(sparsities=(-0.1,)), dict(sparsities=(float("nan"),)),
    dict(sparsity_pattern="4:8"), dict(sparsity_mask="gradient"),
    dict(sparsity_pattern="2:4", sparsities=(0.6,)),
])
def test_bad_sparsity_input_is_refused(changes):
    with pytest.raises(ConfigError):
        validate_train_spec(_spec(**changes))


def test_two_four_at_zero_and_half_is_accepted():
    validate_train_spec(_spec(sparsity_pattern="2:4", sparsities=(0.0, 0.5)))


def test_options_parse_the_sparsity_list():
    spec = build_spec(TrainOptions(model="gpt2-tiny", seq="32", micro_batch="1", dtype="fp32",
                                   device="cpu", sparsity="0,0.6,0.8,0.9"))
    assert spec.sparsities == (0.0, 0.6, 0.8, 0.9) and len(spec.cells()) == 4
    with pytest.raises(ConfigError):
        build_spec(TrainOptions(model="gpt2-tiny", seq="32", device="cpu", sparsity="0,x"))


def test_a_cpu_two_four_cell_records_that_no_sparse_kernel_ran():
    out = run_train_sweep(_spec(sparsity_pattern="2:4", sparsities=(0.5,), steps=2), lambda o: None)
    m = out[0].metrics
    assert out[0].status == "ok" and m["sparse_kernel"] is None
    assert m["sparse_kernel_reason"] == ("no sparse kernel ran: masked dense on cpu (torch's 2:4 "
                                         "semi-structured kernels are CUDA-only)")
    assert m["executed_flops_per_step_global"] == m["hardware_flops_per_step_global"]
    assert m["sparse_peak_utilisation"] is None and m["mfu"] is not None
    assert m["sparsity_measured"] == pytest.approx(0.5, abs=1e-3)
    assert m["speedup_vs_dense"] is None  # the sweep had no dense cell


@pytest.mark.parametrize("level,pattern", [(0.0, "unstructured"), (0.8, "unstructured"),
                                           (0.5, "2:4")])
def test_counted_flops_agree_with_a_count_on_the_real_modules(level, pattern):
    model = GPT(TINY)
    sparsify(model, level, pattern, "random", 3)
    seq = 32
    nonzero = sum(int(m.weight.count_nonzero()) for m in model.modules()
                  if isinstance(m, torch.nn.Linear))
    attention = 12 * TINY.n_layer * TINY.d_model * seq
    counted = sparse_flops_per_token(TINY, seq, level).total
    # each matrix zeros round(level x numel): at most half a weight from level x numel
    assert counted == pytest.approx(6 * nonzero + attention, abs=6 * 0.5 * 4 * TINY.n_layer)
    assert sparse_flops_per_token(TINY, seq, 0).total == model_flops_per_token(TINY, seq).total


def test_mask_and_compressed_memory():
    n = sum(p.numel() for name, p in GPT(TINY).named_parameters() if is_sparse_weight(name))
    assert mask_bytes(TINY) == n
    assert two_four_compressed_bytes(TINY) == n // 2 * 2 + n // 8


@pytest.mark.slow
def test_a_token_budget_sets_each_cells_steps():
    spec = _spec(tokens=300, warmup_steps=1, sparsities=(0.0, 0.6))  # 64 tokens a step
    out = run_train_sweep(spec, lambda o: None)
    for o in out:
        assert o.spec["steps"] == 5 and len(o.raw["rank0"]["loss"]) == 5
    with pytest.raises(ConfigError):
        run_train_sweep(_spec(tokens=64, warmup_steps=1), lambda o: None)
    assert build_spec(TrainOptions(model="gpt2-tiny", seq="32", device="cpu",
                                   tokens="2k")).tokens == 2000
    with pytest.raises(ConfigError):
        build_spec(TrainOptions(model="gpt2-tiny", seq="32", device="cpu", tokens="lots"))


def test_the_table_of_a_sparsity_sweep_shows_level_speedup_and_loss_against_dense():
    from rich.console import Console

    from accelbench.report.table import train_table
    from accelbench.store.record import Record

    def train(**fields) -> Record:
        return Record(kind="train", environment={}, **fields)

    base = {"seq_len": 32, "micro_batch": 2, "gas": 1, "dtype": "fp32", "recompute": "none"}
    dense = train(spec={**base, "sparsity": 0.0}, status="ok", reason="",
                            metrics={"loss_first": 10.0, "loss_last": 5.0,
                                     "step_time_s_median": 1.0})
    sparse = train(spec={**base, "sparsity": 0.9}, status="ok", reason="",
                             metrics={"loss_first": 10.0, "loss_last": 5.5,
                                      "step_time_s_median": 0.5, "sparsity_measured": 0.9,
                                      "speedup_vs_dense": 2.0, "loss_last_vs_dense": 0.5,
                                      "loss_last_vs_dense_relative": 0.1})
    console = Console(width=300, record=True)
    console.print(train_table([dense, sparse]))
    text = console.export_text()
    assert "speedup vs dense" in text and "0.9 (0.900)" in text
    assert "2.00x" in text and "+0.500 (+10.0%)" in text
    plain = Console(width=300, record=True)
    plain.print(train_table([train(spec=base, status="ok", reason="",
                                             metrics=dense.metrics)]))
    assert "sparsity" not in plain.export_text()
