"""FP8 training (torchao float8, emulated on this CPU): what is converted, the loss against BF16,
the MFU convention (BF16 peak; the FP8 peak's utilisation beside it, empty when emulated), the
record of a real cell, and the one-line refusal where torchao is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from accelbench.bench.dtypes import fp8_mode
from accelbench.bench.gemm_peak import SweepPeak, SweepPeaks, resolve_peak
from accelbench.bench.train.cell_metrics import FP8_EMULATED_NOTE, cell_counts, cell_metrics
from accelbench.bench.train.rank_result import RankResult
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.config.layout import Layout
from accelbench.config.precision import resolve
from accelbench.config.presets import get_preset
from accelbench.config.record_kinds import metrics_dict, read_spec
from accelbench.config.records.train import TrainMetrics
from accelbench.hardware.specs import get_spec
from accelbench.models.float8 import convert_blocks, float8_layer_names
from accelbench.models.gpt import GPT
from accelbench.report.precision_label import precision_text

TINY = get_preset("gpt2-tiny").with_changes(vocab_size=512, n_positions=64)


def _block_linears(model: nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if n.startswith("h.") and isinstance(m, nn.Linear)]


def test_only_the_blocks_linear_layers_are_converted():
    torch.manual_seed(0)
    model = GPT(TINY)
    blocks = _block_linears(model)
    done = convert_blocks(model, "tensorwise", emulate=True, fsdp_float8_all_gather=False)
    assert float8_layer_names(model) == blocks and len(blocks) == 4 * TINY.n_layer
    assert (done.converted, done.kept) == (len(blocks), 0)
    assert type(model.lm_head) is nn.Linear and type(model.wte) is nn.Embedding
    # master weights stay fp32 parameters
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_native_float8_keeps_layers_whose_shape_it_cannot_take():
    """torch._scaled_mm needs both weight dimensions divisible by 16: a 40-wide model keeps
    every layer in bf16 on float8 hardware (counted), and converts all of them when emulated."""
    narrow = TINY.with_changes(d_model=40, n_head=4)
    for emulate, converted in ((False, 0), (True, 8)):
        torch.manual_seed(0)
        done = convert_blocks(GPT(narrow), "tensorwise", emulate, fsdp_float8_all_gather=False)
        assert (done.converted, done.kept) == (converted, 8 - converted)


def _train_losses(recipe: str | None, steps: int) -> list[float]:
    """Memorise one fixed batch under bf16 autocast (fp32 master weights, AdamW)."""
    torch.manual_seed(0)
    model = GPT(TINY)
    if recipe:
        convert_blocks(model, recipe, emulate=True, fsdp_float8_all_gather=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = torch.randint(0, TINY.vocab_size, (4, 33), generator=torch.Generator().manual_seed(1))
    losses = []
    for _ in range(steps):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            _, loss = model(batch[:, :-1], batch[:, 1:])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


# Tolerance: e4m3 keeps 3 mantissa bits (relative rounding up to 2^-4, e5m2 gradients 2^-3),
# against bf16's 2^-8; scaled per tensor or row, each GEMM output carries a few percent of noise
# that the loss averages over its 128 tokens. Measured on this machine over the 12 steps, in
# which the bf16 loss falls from 6.25 to 1.95: at most 0.008 nats apart (tensorwise), 0.025
# (rowwise), 0.039 (rowwise_with_gw_hp: bf16 weight gradients, but e4m3 output gradients).
# 0.1 nats (1.6% of the starting loss ln 512) bounds that with margin yet fails a broken
# conversion (wrong scale, lost gradient), which leaves the loss stuck or away by whole nats.
LOSS_TOLERANCE_NATS = 0.1
STEPS = 12


@pytest.fixture(scope="module")
def bf16_losses() -> list[float]:
    return _train_losses(None, STEPS)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "rowwise_with_gw_hp"])
def test_fp8_loss_follows_bf16(recipe, bf16_losses):
    fp8 = _train_losses(recipe, STEPS)
    assert bf16_losses[-1] < 0.5 * bf16_losses[0]  # the reference learns
    assert max(abs(a - b) for a, b in zip(fp8, bf16_losses, strict=True)) < LOSS_TOLERANCE_NATS
    assert fp8 != bf16_losses  # float8 rounding ran: not the bf16 run again


def test_an_fp8_cell_divides_mfu_by_the_bf16_peak():
    """The sweep hands an fp8 cell the bf16 peak (decided once, shared with bf16 cells)."""
    known = (SweepPeak("bf16", 2e11, "bf16", "test bf16 peak"),)
    peaks = SweepPeaks(torch.device("cpu"), False, sink=lambda o: None, known=known)
    assert peaks.get("fp8") == known[0] and resolve("fp8").compute == "bf16"
    h100 = get_spec("h100-sxm")
    sheet = resolve_peak(h100, torch.device("cpu"), resolve("fp8").compute, False,
                         measure=False)
    assert (sheet.flops_per_s, sheet.precision) == (989.4e12, "bf16")


def _fp8_rank(mode: str, fp8_peak: float | None) -> RankResult:
    return RankResult(
        rank=0, step_time_s=0.5, step_times_s=[9.0, 0.5, 0.5, 0.5], loss=[5.0, 4.0, 3.0, 2.0],
        data_wait_s=[0.0] * 4, mem_method="unavailable", optimizer="AdamW (fused)",
        float8={"fp8_mode": mode, "fp8_mode_reason": "test", "fp8_linears_converted": 8,
                "fp8_linears_kept": 0, "fp8_fsdp_float8_all_gather": False,
                "fp8_peak_flops_per_s_per_device": fp8_peak})


def test_fp8_peak_utilisation_sits_beside_mfu_and_is_empty_when_emulated():
    cell = TrainCell(seq_len=32, micro_batch=2, gas=1, dtype="fp8", recompute="none")
    spec = TrainSpec(TINY, seq_lens=(32,), micro_batches=(2,), dtypes=("fp8",), steps=4,
                     warmup_steps=1, fp8_recipe="tensorwise")
    h100 = get_spec("h100-sxm")
    bf16 = resolve_peak(h100, torch.device("cpu"), "bf16", False, measure=False)
    counts = cell_counts(spec, cell, Layout(), bf16)
    flops_per_s = counts.model_flops_per_step_global / 0.5

    native = metrics_dict(cell_metrics(spec, cell, Layout(), counts,
                                       [_fp8_rank("native", 1978.9e12)], 1e6, "none"))
    assert native["mfu"] == pytest.approx(flops_per_s / 989.4e12)
    assert native["peak_precision"] == "bf16"
    assert native["fp8_peak_utilisation"] == pytest.approx(flops_per_s / 1978.9e12)
    assert native["fp8_peak_note"] is None and native["fp8_mode"] == "native"

    emulated = metrics_dict(cell_metrics(spec, cell, Layout(), counts,
                                         [_fp8_rank("emulated", None)], 1e6, "none"))
    assert emulated["mfu"] == pytest.approx(native["mfu"])  # still over the bf16 peak
    assert emulated["fp8_peak_utilisation"] is None
    assert emulated["fp8_peak_note"] == FP8_EMULATED_NOTE

    no_sheet = metrics_dict(cell_metrics(spec, cell, Layout(), counts,
                                         [_fp8_rank("native", None)], 1e6, "none"))
    assert no_sheet["fp8_peak_utilisation"] is None and "no FP8 peak" in no_sheet["fp8_peak_note"]


def test_this_cpu_runs_fp8_emulated():
    mode, reason = fp8_mode(torch.device("cpu"))
    assert mode == "emulated" and "cpu" in reason


@pytest.mark.slow
def test_an_fp8_cell_records_its_emulation_and_no_fp8_mfu():
    known = (SweepPeak("bf16", 1e11, "bf16", "test bf16 peak"),)
    spec = TrainSpec(TINY, seq_lens=(32,), micro_batches=(2,), dtypes=("bf16", "fp8"), steps=3,
                     warmup_steps=1, device="cpu", fp8_recipe="rowwise", peaks=known)
    bf16, fp8 = run_train_sweep(spec, lambda o: None)
    assert (bf16.status, fp8.status) == ("ok", "ok")
    m = fp8.metrics
    assert fp8.spec["fp8_recipe"] == "rowwise" and bf16.spec["fp8_recipe"] is None
    assert (m["fp8_mode"], m["fp8_linears_converted"], m["fp8_linears_kept"]) == ("emulated", 8, 0)
    assert m["peak_label"] == "test bf16 peak" and m["peak_precision"] == "bf16"
    assert m["mfu"] == pytest.approx(m["model_flops_per_step_global"]
                                     / m["step_time_s_median"] / 1e11)
    assert m["fp8_peak_utilisation"] is None and m["fp8_peak_flops_per_s_per_device"] is None
    assert bf16.metrics["fp8_mode"] is None  # a bf16 cell carries no fp8 fields


@pytest.mark.slow
def test_fp8_without_torchao_is_one_line_and_exit_2(tmp_path):
    """torchao made unimportable: `train --dtype fp8` refuses before anything is made."""
    code = ("import sys; sys.modules['torchao'] = None; "
            "sys.argv = ['accelbench', 'train', '--dtype', 'fp8', '--steps', '2']; "
            "from accelbench.cli.main import main; main()")
    env = {**os.environ, "ACCELBENCH_DB": str(tmp_path / "results.db")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("error: dtype: fp8 needs torchao, which is not installed here "
                           "(allowed: fp32, fp16, bf16; fp8 after pip install "
                           "'accelbench[fp8]')\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_fp8_composes_with_recompute():
    """Full recompute reruns the float8 forward in the backward: the same losses, bit for bit."""
    known = (SweepPeak("bf16", 1e11, "bf16", "test bf16 peak"),)
    spec = TrainSpec(TINY, seq_lens=(32,), micro_batches=(2,), dtypes=("fp8",), steps=3,
                     warmup_steps=1, device="cpu", fp8_recipe="tensorwise", peaks=known,
                     recomputes=("none", "full"))
    plain, full = run_train_sweep(spec, lambda o: None)
    assert (plain.status, full.status) == ("ok", "ok")
    assert plain.raw["rank0"]["loss"] == full.raw["rank0"]["loss"]
    assert full.metrics["hfu"] > full.metrics["mfu"]


def test_tables_name_how_an_fp8_cell_ran():
    """The precision column never shows an FP8 utilisation for an emulated cell."""
    spec = read_spec("train", {"dtype": "fp8", "fp8_recipe": "rowwise"})
    emulated = TrainMetrics(fp8_mode="emulated")
    assert precision_text(spec, emulated) == "fp8 rowwise (emulated)"
    native = TrainMetrics(fp8_mode="native", fp8_peak_utilisation=0.4123)
    assert precision_text(spec, native) == "fp8 rowwise (41.2% of FP8 peak)"
    assert precision_text(read_spec("train", {"dtype": "bf16"}), native) == "bf16"


def test_an_moe_router_stays_in_high_precision():
    """MoE blocks: attention converts; the router (its few outputs decide the routing) and the
    experts (stacked weights, not nn.Linear) stay bf16."""
    model = GPT(get_preset("moe-tiny"))
    done = convert_blocks(model, "tensorwise", emulate=True, fsdp_float8_all_gather=False)
    names = float8_layer_names(model)
    assert names and not any("router" in n or "experts" in n for n in names)
    assert done.kept == sum(1 for n in _block_linears(model) if n.endswith("router"))
