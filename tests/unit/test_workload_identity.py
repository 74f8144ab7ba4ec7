"""Workload identity: machines are compared only on identical workloads (model shape, sequence,
global batch, precision, layout, sparsity), never on a name two workloads share."""

from accelbench.bench.train.cell import cell_spec
from accelbench.bench.train.spec import TrainCell, TrainSpec, cell_layout
from accelbench.config.presets import get_preset
from accelbench.report.compare import best_cells, workload, workload_of
from accelbench.report.machines import Machine
from accelbench.store.fingerprint import WORKLOAD_KEY, stamped_spec, workload_id
from accelbench.store.record import Record


def _spec(model="gpt2-tiny", name=None, mb=2, gas=1, dtype="fp32", recompute="none",
          sparsity=0.0, **model_changes):
    cfg = get_preset(model)
    cfg = cfg.with_changes(**model_changes) if model_changes else cfg
    if name:
        cfg = cfg.with_changes(name=name)
    spec = TrainSpec(model=cfg, seq_lens=(32,), micro_batches=(mb,), gas=(gas,),
                     dtypes=(dtype,))
    cell = TrainCell(dtype=dtype, recompute=recompute, seq_len=32, gas=gas, micro_batch=mb,
                     sparsity=sparsity)
    return cell_spec(spec, cell, cell_layout(spec, 1, gas), "cpu")


def test_the_identity_is_what_ran_not_how():
    base = workload_id("train", _spec())
    assert workload_id("train", _spec(name="renamed")) == base  # a name is not a shape
    assert workload_id("train", _spec(mb=1, gas=2)) == base  # one global batch, split
    assert workload_id("train", _spec(recompute="full")) == base  # how it ran
    for other in (_spec(n_layer=3), _spec(mb=4), _spec(dtype="bf16"), _spec(sparsity=0.5)):
        assert workload_id("train", other) != base
    assert workload_id("peak", {"dtype": "fp32"}) is None


def test_records_carry_it_and_older_records_derive_it():
    spec = _spec()
    stamped = stamped_spec("train", spec, {"host": "h"})
    assert stamped[WORKLOAD_KEY] == workload_id("train", spec)
    old = Record(kind="train", status="ok", spec=spec, environment={})
    assert workload_of(old) == stamped[WORKLOAD_KEY]


def _record(spec, tokens_per_s):
    metrics = {"tokens_per_s_global": tokens_per_s, "tokens_per_s_per_device": tokens_per_s,
               "step_time_s_median": 1.0, "step_time_s_min": 0.9, "step_time_s_max": 1.1,
               "n_devices": 1, "tokens_per_step_global": 64}
    return Record(kind="train", status="ok", spec=spec, environment={}, metrics=metrics)


def test_two_checkpoints_of_one_name_are_never_compared():
    """Two `hf:DIR` checkpoints of different sizes were both 'train ckpt seq 64', and the
    report said the second machine was 2.34x faster."""
    small, large = _spec(name="ckpt"), _spec(name="ckpt", n_layer=4)
    machines = [Machine(1, "A", "a", {}, (_record(small, 100.0),), ("a.db",)),
                Machine(2, "B", "b", {}, (_record(large, 234.0),), ("b.db",))]
    groups = best_cells(machines)
    assert len(groups) == 2 and all(len(items) == 1 for items in groups.values())
    names = {name for name, _ in groups}
    assert names == {workload(_record(small, 1)), workload(_record(large, 1))}
    assert all("ckpt" in n and "seq 32 batch 2" in n for n in names)


def test_results_list_shows_ranks_layout_and_workload():
    """A 2-rank CPU run showed 'x1' devices, and dp=2 and tp=2 looked alike."""
    from rich.console import Console

    from accelbench.report.listing import list_table

    spec = {**_spec(), "world_size": 2,
            "layout": {"dp": 1, "tp": 2, "pp": 1, "zero": 0, "cp": 1}}
    record = Record(kind="train", status="ok", spec=spec, environment={"device_count": 1},
                    id=7)
    console = Console(width=200, record=True)
    console.print(list_table([record]))
    row = next(line for line in console.export_text().splitlines() if "│ 7 " in line)
    cells = [c.strip() for c in row.split("│")]
    assert "2" in cells and "dp=1 tp=2 pp=1 zero=0" in cells
    assert workload_of(record)[:6] in cells
