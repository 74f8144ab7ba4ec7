"""The store's measured training runs reach the planner's validation."""

from accelbench.analytics.measured_runs import validate_measured_runs
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.train import TrainMetrics
from accelbench.report.measured import measured_training_runs
from accelbench.store.record import Record
from accelbench.store.store import ResultStore


def _train_record(device_key, status="ok", mfu=0.45):
    spec = {"model_name": "gpt2-xl", "seq_len": 1024, "micro_batch": 8, "gas": 1,
            "dtype": "bf16", "recompute": "none", "layout": {"dp": 1, "tp": 1, "pp": 1}}
    return Record(kind="train", status=status, spec=spec,
                  environment={"device_spec_key": device_key},
                  metrics=metrics_dict(TrainMetrics(mfu=mfu, n_devices=1) if status == "ok"
                                       else TrainMetrics(mem_estimate_bytes_per_rank=1e9)))


def test_only_ok_runs_on_known_devices_are_used(tmp_path):
    store = ResultStore(tmp_path / "m.db")
    store.add(_train_record("h100-sxm"))
    store.add(_train_record(None))          # a CPU run: no spec row
    store.add(_train_record("h100-sxm", status="oom"))
    runs = measured_training_runs(store)
    assert len(runs) == 1 and runs[0].device_key == "h100-sxm" and runs[0].mfu == 0.45
    rows = validate_measured_runs(runs)
    assert rows[0].observed_mfu == 0.45 and 0 < rows[0].predicted_mfu < 1


def test_a_sparse_cell_is_not_a_dense_run_to_validate(tmp_path):
    """The H200 run's 2:4 cell (0.29x of its dense cell) would have read as a 71% planner
    error: the validation predicts dense layouts, so sparse cells stay out."""
    store = ResultStore(tmp_path / "m.db")
    dense, sparse = _train_record("h200", mfu=0.35), _train_record("h200", mfu=0.10)
    dense.spec["sparsity"], sparse.spec["sparsity"] = 0.0, 0.5
    store.add(dense)
    store.add(sparse)
    assert [run.mfu for run in measured_training_runs(store)] == [0.35]
