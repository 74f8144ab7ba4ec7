"""Every record kind the code writes is declared with its metrics class; an undeclared kind
is an error, not another kind's names (metric_names once fell back to train's for any kind,
and the scale and seq-search kinds were written from literal dicts)."""

from __future__ import annotations

import ast
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from accelbench.config import records
from accelbench.config.record_kinds import METRICS_BY_KIND, carries, metric_names, record_kinds
from accelbench.config.records.fields import (
    CommFields,
    EnergyFields,
    MemoryFields,
    PeakFields,
    TopologyFields,
    TrialFields,
)
from accelbench.config.records.scale import ScaleMetrics
from accelbench.config.records.seq_search import SeqSearchMetrics
from accelbench.config.records.train import (
    DivergenceFields,
    Fp8Fields,
    MoeFields,
    SparsityFields,
    StepFields,
    TrainMetrics,
)

ROOT = Path(__file__).resolve().parents[2] / "accelbench"


def _outcome_kinds() -> set[str]:
    """The literal kinds of every Outcome(...) and Outcome(kind=...) built in the package,
    constants resolved where they are module-level string assignments."""
    kinds: set[str] = set()
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        consts = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                  and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                  for t in n.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Outcome":
                first = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg == "kind"), None)
                if isinstance(first, ast.Constant):
                    kinds.add(first.value)
                elif isinstance(first, ast.Name) and first.id in consts:
                    kinds.add(consts[first.id])
    return kinds


def test_every_kind_written_is_declared():
    written = _outcome_kinds()
    assert {"train", "block", "scale", "seq-search"} <= written
    assert written <= set(METRICS_BY_KIND), written - set(METRICS_BY_KIND)


def test_an_undeclared_kind_is_an_error():
    with pytest.raises(ValueError, match="'inference' declares no metrics"):
        metric_names("inference")


def test_scale_and_seq_search_names():
    assert metric_names("scale") == ("rows", "baseline_devices")
    assert metric_names("seq-search")[0] == "fits"
    assert METRICS_BY_KIND["scale"] is ScaleMetrics
    assert METRICS_BY_KIND["seq-search"] is SeqSearchMetrics


def test_the_kind_table_is_assembled_from_the_schema_modules_alone():
    """Each schema module of config/records/ declares its kinds (KINDS); the table is their
    union, read without importing any workload (config imports no workload: test_module_graph)."""
    declared: set[str] = set()
    for path in sorted((ROOT / "config" / "records").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "KINDS"
                                                    for t in node.targets):
                declared |= {k.value for k in node.value.keys}
    assert declared == set(METRICS_BY_KIND) == set(record_kinds())
    assert list(record_kinds()) == sorted(declared)


def test_a_kind_two_schema_modules_declare_is_an_error(monkeypatch, tmp_path):
    (tmp_path / "train_again.py").write_text(
        "from accelbench.config.records.base import RecordKind\n"
        "from accelbench.config.records.train import TrainMetrics\n"
        "KINDS = {'train': RecordKind(TrainMetrics)}\n")
    monkeypatch.setattr(records, "__path__", [*records.__path__, str(tmp_path)])
    try:
        with pytest.raises(ValueError, match="'train' is declared twice: in "
                                             "accelbench.config.records.train and "
                                             "accelbench.config.records.train_again"):
            record_kinds()
    finally:
        sys.modules.pop("accelbench.config.records.train_again", None)
        if hasattr(records, "train_again"):
            delattr(records, "train_again")


# The train columns of every export, in order, as they were before TrainMetrics was composed of
# groups: moving a field or a group changes every csv written since, so it is pinned here.
TRAIN_COLUMNS = """
    trials interval_confidence interval_method interval_coverage intervals trial_seed
    trial_positions trial_cells disturbed disturbed_trials disturbance_reasons
    other_cpu_fraction_max n_nodes ranks_per_node collectives_cross_node
    peak_flops_per_s_per_device peak_label peak_precision peak_clock_mhz mfu_at_measured_clock
    mem_estimate_bytes_per_rank mem_peak_bytes_per_rank mem_base_bytes_per_rank
    mem_added_bytes_per_rank_max mem_added_max_rank mem_method mem_estimate_widths
    mem_estimate_moment energy_source energy_interval_s energy_window_s energy_window_too_short
    energy_note energy_j energy_j_per_rank energy_devices energy_j_per_device
    avg_power_w_per_device peak_power_w_per_device sm_clock_mhz_mean_per_device
    sm_clock_mhz_mean energy_per_token_j tokens_per_j n_devices tokens_per_step_global
    samples_per_step_global timed_steps few_samples step_time_s_median step_time_s_min
    step_time_s_max step_time_s_iqr step_time_s_median_per_rank step_time_slowest_rank
    compute_time_s_median_per_rank wait_time_s_median_per_rank slow_rank slow_rank_evidence
    tokens_per_s_global tokens_per_s_per_device samples_per_s_global samples_per_s_per_device
    model_flops_per_step_global hardware_flops_per_step_global tflops_per_device mfu hfu
    data_wait_s_median data_wait_fraction loss_first loss_last optimizer
    collective_time_s_per_rank collective_time_source pipeline_bubble_fraction_theory
    comm_bytes_per_step_per_rank comm_bytes_pp_rank comm_bytes_per_step_ideal_per_rank
    diverged_step sparsity_measured executed_flops_per_step_global
    sparse_peak_flops_per_s_per_device sparse_peak_utilisation sparse_kernel
    sparse_kernel_reason speedup_vs_dense speedup_vs_dense_low speedup_vs_dense_high
    speedup_vs_dense_verdict loss_last_vs_dense loss_last_vs_dense_relative fp8_mode
    fp8_mode_reason fp8_linears_converted fp8_linears_kept fp8_fsdp_float8_all_gather
    fp8_peak_flops_per_s_per_device fp8_peak_utilisation fp8_peak_note
    moe_tokens_routed_per_expert moe_tokens_dropped_per_expert moe_drop_fraction
    moe_load_imbalance all_to_all_time_s_per_rank all_to_all_fraction
""".split()


def test_train_metrics_is_its_groups_in_the_export_order():
    """TrainMetrics declares nothing itself: its fields are its groups', in the order the
    export's columns have always had; each group's readers can ask `carries`."""
    groups = (TrialFields, TopologyFields, PeakFields, MemoryFields, EnergyFields, StepFields,
              CommFields, DivergenceFields, SparsityFields, Fp8Fields, MoeFields)
    assert metric_names("train") == tuple(TRAIN_COLUMNS)
    assert metric_names("noise-cell") == tuple(TRAIN_COLUMNS)
    assert [f.name for f in fields(TrainMetrics)] == [f.name for g in groups for f in fields(g)]
    assert set(TrainMetrics.__bases__) == set(groups)
    assert carries("train", CommFields) and carries("noise-cell", CommFields)
    assert not carries("block", CommFields) and not carries("undeclared", CommFields)
