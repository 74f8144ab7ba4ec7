"""The sparsity figure of a database where a 2:4 sweep's dense cell sits beside an ordinary
training cell of the same shape (the gpu-accept study): each sweep keeps its own dense cell,
and two points at one level never make the figure compare records (the first CPU rehearsal
of scripts/device-check stopped the report there with a TypeError)."""

from __future__ import annotations

from accelbench.report.cells import Rate, points_series
from accelbench.report.machines import group_machines
from accelbench.store.record import Record
from accelbench.workloads.train.seqlen import seq_section
from accelbench.workloads.train.sparsity_section import _groups, sparsity_section

ENV = {"device_type": "cpu", "device_name": "CPU", "device_count": 1, "cpu": "CPU",
       "cpu_count": 2, "torch": "2.13.0+cpu", "host": "vm"}
SPEC = {"model_name": "gpt2-tiny", "seq_len": 64, "dtype": "bf16", "micro_batch": 2, "gas": 1,
        "recompute": "none", "compile": False}


def _cell(sparsity: float, pattern: str, tokens_per_s: float) -> tuple[str, Record]:
    spec = {**SPEC, "sparsity": sparsity, "sparsity_pattern": pattern}
    metrics = {"n_devices": 1, "tokens_per_step_global": 128,
               "step_time_s_median": 128 / tokens_per_s, "loss_last": 5.0}
    return ("x.db", Record("train", "ok", spec, ENV, metrics))


def test_a_two_four_sweep_keeps_its_own_dense_cell():
    machines = group_machines([_cell(0.0, "unstructured", 1000), _cell(0.0, "2:4", 900),
                               _cell(0.5, "2:4", 450)])
    (group,) = _groups(machines).values()
    assert [(r.spec["sparsity_pattern"], r.spec["sparsity"]) for r in group] == [
        ("2:4", 0.0), ("2:4", 0.5)]
    assert sparsity_section(machines).figures


def test_two_points_at_one_level_are_drawn_without_comparing_rates():
    series = points_series("x", [(0.0, Rate(1.0), False), (0.0, Rate(2.0), False),
                                 (0.5, Rate(0.5), False)])
    assert series.x == (0.0, 0.0, 0.5) and series.y == (1.0, 2.0, 0.5)


def test_a_sparse_cell_never_passes_for_the_dense_cell_of_its_shape():
    """The first GPU run's report listed the 2:4 cell (0.29x of dense) in table III as the
    plain bf16 cell and hid the dense one: the cells shared one key."""
    machines = group_machines([_cell(0.0, "unstructured", 1000), _cell(0.5, "2:4", 300)])
    seq = seq_section(machines)
    table = next(t for t in seq.tables if t.title == "Training cells by sequence length")
    assert len(table.rows) == 1 and "1,000" in " ".join(table.rows[0])
    assert any("1 sparse cell" in p for p in seq.paragraphs)
    cells = next(t for t in sparsity_section(group_machines(
        [_cell(0.0, "2:4", 1000), _cell(0.5, "2:4", 300)])).tables if t.title == "Sparsity cells")
    assert [row[4] for row in cells.rows] == ["0", "0.5"]
    assert cells.rows[1][7].startswith("0.30x")  # its speedup over its dense cell
