"""The sequence-length study past one device: --mem-limit is a budget per device (a CPU rank is
a device) while the host's memory is shared by its ranks, in one rule for the runtime and the
planner; --nproc follows --layout; the study plans a cp sweep in which a length refused on one
rank fits on two; and the report says where each length first fits."""

from __future__ import annotations

import pytest
import torch
from cli_run import run_main

from accelbench.bench import guard
from accelbench.bench.study_planner import Planner, plan_study
from accelbench.bench.train.train_options import TrainOptions, build_spec, resolve_nproc
from accelbench.config.fit import fit_basis
from accelbench.config.study_file import load_study
from accelbench.report.machines import group_machines
from accelbench.store.record import Record
from accelbench.workloads.train import study_plan as train_plan
from accelbench.workloads.train.seqlen import first_fits, seq_section

GIB = 1024**3
CPU = torch.device("cpu")


@pytest.fixture
def host(monkeypatch):
    """A host with 10 GiB available (8 GiB usable, the guard's 80%)."""
    monkeypatch.setattr(guard, "available_cpu_memory_bytes", lambda: 10 * GIB)


# --- the budget ---------------------------------------------------------------------------


def test_the_user_limit_bounds_each_rank_and_the_host_is_shared(host):
    assert guard.memory_budget_bytes(CPU, GIB, 1) == GIB
    assert guard.memory_budget_bytes(CPU, GIB, 2) == GIB  # per device: not halved
    assert guard.memory_budget_bytes(CPU, None, 2) == 4 * GIB  # the host's 8 GiB over 2 ranks
    assert guard.memory_budget_bytes(CPU, 6 * GIB, 2) == 4 * GIB  # the host's share decides
    assert guard.memory_budget_bytes(torch.device("meta"), GIB, 4) == GIB  # a device a rank


def test_a_refusal_names_the_budget_that_decided(host):
    assert guard.refuse_if_too_big(0.9 * GIB, CPU, GIB, 2) is None  # 2 x 0.9 > 1: still fits
    by_user = guard.refuse_if_too_big(1.2 * GIB, CPU, GIB, 2)
    assert fit_basis("oom", by_user) == "budget" and "--mem-limit 1.00 GiB" in by_user
    by_host = guard.refuse_if_too_big(4.5 * GIB, CPU, 6 * GIB, 2)
    assert fit_basis("oom", by_host) == "estimated"
    assert "shared by its 2 ranks" in by_host and "4.00 GiB usable" in by_host


def test_the_planner_takes_the_runtime_rule(host):
    planner = Planner(CPU)
    for ranks, need in ((1, 0.9), (2, 0.9), (2, 4.5), (4, 2.5)):
        cell = planner.cell("c", "fp32", need * GIB, GIB * 3, 1e9, False, 1, ranks_on_host=ranks)
        assert cell.budget_bytes == guard.memory_budget_bytes(CPU, 3 * GIB, ranks)
        refused = guard.refuse_if_too_big(need * GIB, CPU, 3 * GIB, ranks) is not None
        assert (cell.verdict != "fits") is refused, (ranks, need)


# --- --nproc from --layout ---------------------------------------------------------------------


def test_nproc_follows_the_layout_when_not_given():
    assert resolve_nproc(None, "") == 1
    assert resolve_nproc(None, "cp=2") == 2
    assert resolve_nproc(None, "dp=2,cp=2") == 4
    assert resolve_nproc(None, "tp=2,pp=2,cp=2") == 8
    assert resolve_nproc(None, "dp=1,zero=1") == 1
    assert resolve_nproc(4, "cp=2") == 4  # given: dp from it (2 here), as before
    spec = build_spec(TrainOptions(model="gpt2-tiny", seq="64", layout="cp=2", device="cpu"))
    assert spec.nproc == 2
    assert build_spec(TrainOptions(model="gpt2-tiny", seq="64", device="cpu")).nproc == 1


def test_an_nproc_that_contradicts_the_layout_is_one_line_and_exit_2(monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, "train", "--model", "gpt2-tiny", "--seq",
                              "64", "--layout", "cp=2", "--nproc", "3", "--device", "cpu")
    assert code == 2 and not out
    assert err.startswith("error: layout: ") and err.count("\n") == 1, err


# --- the study's cp sweep ----------------------------------------------------------------------


def _seqlen(monkeypatch, cores: int):
    monkeypatch.setattr(train_plan, "available_devices",
                        lambda device: (cores, f"{cores} CPU core(s), one a rank"))
    plan = plan_study(load_study("emani2023"), "quick", "cpu")
    return next(e for e in plan.experiments if e.experiment.name == "seqlen")


def test_the_quick_study_runs_seq_512_over_two_ranks_where_one_refuses_it(host, monkeypatch):
    seqlen = _seqlen(monkeypatch, 2)
    cells = {c.label.split(" mb")[0]: c for c in seqlen.cells}
    one, two = cells["layout dp=1: seq 512"], cells["layout cp=2: seq 512"]
    assert one.verdict == "does not fit" and one.time_s == 0.0 and one.budget_bytes == GIB
    assert two.verdict == "fits" and two.time_s > 0 and two.budget_bytes == GIB
    assert 0.4 < two.mem_bytes / one.mem_bytes < 0.6  # about half the sequence a rank
    assert cells["layout cp=2: seq 1024"].verdict == "does not fit"


def test_a_layout_over_the_devices_present_is_left_out(host, monkeypatch):
    seqlen = _seqlen(monkeypatch, 1)
    assert all(c.label.startswith("layout dp=1") for c in seqlen.cells) and seqlen.cells
    (left,) = [s for s in seqlen.sweeps if not s.cells]
    assert left.note == "layout cp=2 left out: 2 device(s), this machine has 1 CPU core(s), " \
                        "one a rank"


# --- the report ----------------------------------------------------------------------------------

ENV = {"device_type": "cpu", "device_name": "CPU", "device_count": 1, "cpu": "CPU",
       "cpu_count": 2, "torch": "2.13.0+cpu", "host": "vm"}
REFUSED = ("does not fit (user budget): estimated 1.67 GiB > --mem-limit 1.00 GiB (decided "
           "before allocating)")


def _cell(seq: int, cp: int, tokens_per_s: float | None) -> tuple[str, Record]:
    spec = {"model_name": "gpt2-tiny", "seq_len": seq, "dtype": "fp32", "micro_batch": 4,
            "gas": 1, "recompute": "none", "compile": False, "world_size": cp,
            "layout": {"dp": 1, "tp": 1, "pp": 1, "zero": 0, "cp": cp}}
    if tokens_per_s is None:
        return "x.db", Record("train", "oom", spec, ENV, {}, reason=REFUSED)
    metrics = {"n_devices": cp, "tokens_per_step_global": 4 * seq,
               "step_time_s_median": 4 * seq / tokens_per_s, "loss_last": 5.0}
    return "x.db", Record("train", "ok", spec, ENV, metrics)


def test_the_report_says_where_each_length_first_fits():
    cells = [_cell(256, 1, 1000), _cell(256, 2, 1500), _cell(512, 1, None), _cell(512, 2, 800),
             _cell(1024, 1, None), _cell(1024, 2, None)]
    section = seq_section(group_machines(cells))
    fits = next(t for t in section.tables if t.title == "Where each sequence length first fits")
    rows = {row[3]: row for row in fits.rows}
    assert rows["256"][4:6] == ("1 rank(s)", "-")  # no parallel degree above one
    assert rows["256"][6] == "1,000" and rows["256"][8] == "-"
    assert rows["512"][4:6] == ("2 rank(s)", "cp=2")
    assert rows["512"][6:8] == ("400", "800")  # per device, global
    assert rows["512"][8] == "1: does not fit (user budget)"
    assert rows["1024"][4] == "does not fit"
    assert rows["1024"][8] == "1: does not fit (user budget); 2: does not fit (user budget)"
    cells_table = next(t for t in section.tables if t.title.startswith("Training cells"))
    assert sum("cp=2" in row[7] for row in cells_table.rows) == 3  # launched cp cells shown
    labels = {s.label for s in section.figures[0].panels[0].series}
    assert any("cp=2" in label for label in labels) and any("cp=1" in lb for lb in labels)


def test_first_fits_takes_the_best_cell_at_the_fewest_ranks():
    records = [r for _, r in (_cell(512, 4, 900), _cell(512, 2, 500), _cell(512, 2, 700),
                              _cell(512, 1, None))]
    best, fewer = first_fits(records)
    assert best is records[2] and fewer == [records[3]]
    assert first_fits([records[3]]) == (None, [records[3]])


def test_the_runtime_estimate_counts_the_gathered_keys_and_values_the_planner_a_ring():
    from accelbench.analytics.activations import (
        EAGER,
        RUNTIME_KERNELS,
        activation_bytes_per_layer,
        cp_gathered_kv_bytes,
    )
    from accelbench.config.presets import resolve_model

    cfg = resolve_model("gpt2-tiny:d_model=256,n_head=4,vocab_size=1024,n_positions=8192")
    # 2 (K and V) x 2 bytes x 8192 x (1 - 1/4) x 1 x 256 wide
    assert cp_gathered_kv_bytes(cfg, 8192, 1, 1, 4) == 2 * 2 * 8192 * 0.75 * 256
    assert cp_gathered_kv_bytes(cfg, 8192, 1, 1, 1) == 0.0
    for recompute, extra in (("none", 2 * 2 * 8192 * 0.75 * 256 * 2), ("full", 0.0)):
        ring = activation_bytes_per_layer(cfg, 8192, 1, 4, recompute=recompute, cp=4,
                                          kernels=EAGER)
        gathered = activation_bytes_per_layer(cfg, 8192, 1, 4, recompute=recompute, cp=4,
                                              kernels=RUNTIME_KERNELS)
        assert gathered - ring == extra  # fp32: twice the 16-bit bytes
