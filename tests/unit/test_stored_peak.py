"""One measured peak per machine: a later sweep on the same machine divides by the stored peak
(no new measurement, its label names the record); --remeasure-peak measures again; another
machine fingerprint or another thread count finds nothing."""

import json

from cli_run import run_main

from accelbench.bench import gemm_peak as peak_mod
from accelbench.bench.outcome import Outcome
from accelbench.bench.recording.peaks import machine_peaks
from accelbench.bench.recording.recorder import Recorder
from accelbench.bench.recording.session import SweepView, record_sweep
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.peak import PeakMetrics
from accelbench.store.record import Record
from accelbench.store.store import ResultStore

BLOCK = ("block", "--model", "gpt2-tiny", "--seq", "16", "--batch", "1", "--dtype", "fp32",
         "--repeats", "2", "--warmup", "0", "--device", "cpu", "--json")


def _block(monkeypatch, capsys, db, *extra):
    code, out, _ = run_main(monkeypatch, capsys, *BLOCK, "--db", str(db), *extra)
    assert code == 0
    return json.loads(out)


def test_a_second_sweep_reuses_the_machines_peak(monkeypatch, capsys, tmp_path, quick_peak):
    db = tmp_path / "peak.db"
    first = _block(monkeypatch, capsys, db)
    second = _block(monkeypatch, capsys, db, "--rerun")
    assert [r["kind"] for r in first] == ["peak", "block"]
    assert [r["kind"] for r in second] == ["block"]  # measured nothing: the stored peak
    peak_id = first[0]["id"]
    label = second[0]["metrics"]["peak_label"]
    assert f"record {peak_id} of" in label and "reused" in label
    assert second[0]["metrics"]["peak_flops_per_s_per_device"] == \
        first[1]["metrics"]["peak_flops_per_s_per_device"]


def _peak_record(environment, threads, flops):
    metrics = PeakMetrics(flops, flops, flops, 5, 64, "nt", threads)
    spec = {"workload": "peak", "device": "cpu", "dtype": "fp32", "precision": "fp32",
            "tf32": False, "threads": threads}
    return Record(kind="peak", status="ok", spec=spec, environment=environment,
                  metrics=metrics_dict(metrics))


def test_the_lookup_matches_machine_and_threads_and_takes_the_latest(tmp_path):
    store = ResultStore(tmp_path / "p.db")
    here = {"device_type": "cpu", "cpu": "X", "host": "a", "torch_threads": 2}
    store.add(_peak_record(here, 1, 1e10))
    latest = store.add(_peak_record(here, 1, 2e10))
    store.add(_peak_record({**here, "host": "b"}, 1, 9e10))  # another machine
    lookup = machine_peaks(store, here)
    spec = {"dtype": "fp32", "precision": "fp32", "tf32": False, "threads": 1}
    found = lookup(spec)
    assert found.flops_per_s == 2e10 and f"record {latest} of" in found.label
    assert lookup({**spec, "threads": 2}) is None
    assert machine_peaks(store, {**here, "cpu": "Y"})(spec) is None
    store.close()


def test_remeasure_peak_measures_again(tmp_path, quick_peak):
    import torch

    store = ResultStore(tmp_path / "r.db")
    recorder = Recorder(store, {"device_type": "cpu", "host": "h", "device_name": "cpu"})
    view = SweepView(banner=lambda t: None, cell=lambda *a: None, step=None,
                     failed=lambda r: None)

    def sweep(sink, step, cell, skip) -> list[Outcome]:
        peaks = peak_mod.SweepPeaks(torch.device("cpu"), False, sink, threads=1)
        return [Outcome("block", "ok", {"peak_label": peaks.get("fp32").label}, {}, {})]

    def peak_count() -> int:
        return len(ResultStore(tmp_path / "r.db", write=False).query(kind="peak"))

    record_sweep(sweep, recorder, view, "one", rerun=True)
    assert peak_count() == 1
    record_sweep(sweep, Recorder(ResultStore(tmp_path / "r.db"), recorder.environment), view,
                 "two", rerun=True)
    assert peak_count() == 1
    record_sweep(sweep, Recorder(ResultStore(tmp_path / "r.db"), recorder.environment), view,
                 "three", rerun=True, remeasure_peak=True)
    assert peak_count() == 2


def test_the_report_names_one_peak_and_what_it_set_aside():
    from accelbench.report.machines import group_machines
    from accelbench.report.overview import _peaks

    def cell(flops, label):
        metrics = {"peak_flops_per_s_per_device": flops, "peak_precision": "fp32",
                   "peak_label": label, "forward_backward_mfu": 0.4}
        return ("a.db", Record(kind="block", status="ok", spec={}, environment={},
                               metrics=metrics))

    (one,) = group_machines([cell(1e11, "measured x"), cell(1e11, "measured x")])
    assert _peaks(one) == "fp32 0.1 TFLOPS (GEMM, ? thread(s), cells of a.db)"
    # two peaks on one machine: every MFU over the best undisturbed, the other set aside
    (two,) = group_machines([cell(1e11, "measured x"), cell(4e11, "measured y")])
    assert _peaks(two).startswith("fp32 0.4 TFLOPS") and "set aside: 0.1 (cells of a.db" in \
        _peaks(two)
    assert sorted(r.typed.forward_backward.mfu for r in two.records) == [0.1, 0.4]


def test_the_remeasure_peak_option_measures_again(monkeypatch, capsys, tmp_path, quick_peak):
    db = tmp_path / "again.db"
    _block(monkeypatch, capsys, db)
    again = _block(monkeypatch, capsys, db, "--rerun", "--remeasure-peak")
    assert [r["kind"] for r in again] == ["peak", "block"]
