"""`accelbench noise`, the A/A check: end to end on the CPU with a tiny configuration (its
records, its verdict, its JSON), bad input refused before anything runs, and the report's
noise-floor section and sentence."""

from __future__ import annotations

import json

import pytest
from cli_run import run_main

from accelbench.analytics.stats import FASTER, NO_DIFFERENCE, SLOWER
from accelbench.report import build_report
from accelbench.report.machines import group_machines, load_records
from accelbench.report.noise_floor import noise_sentence
from accelbench.store.fingerprint import WORKLOAD_KEY
from accelbench.store.store import ResultStore
from accelbench.workloads.noise.runner import CELL_KIND, CONDITION_KEY, NOISE_KIND, noise_floor

TINY = ("--device", "cpu", "--model", "gpt2-tiny", "--seq", "16", "--steps", "1",
        "--warmup-steps", "0", "--trials", "5")


def _noise(monkeypatch, capsys, db, *extra):
    return run_main(monkeypatch, capsys, "noise", *TINY, "--db", str(db), *extra)


def _by_kind(db):
    store = ResultStore(db, write=False)
    try:
        records = store.query()
    finally:
        store.close()
    kinds: dict[str, list] = {}
    for r in sorted(records, key=lambda r: r.id):
        kinds.setdefault(r.kind, []).append(r)
    return kinds


@pytest.mark.slow  # measures two cells (~1.8 s)
def test_the_check_records_two_cells_and_one_verdict(monkeypatch, capsys, tmp_path,
                                                     quick_peak):
    db = tmp_path / "results.db"
    code, out, err = _noise(monkeypatch, capsys, db, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert sorted(r["kind"] for r in shown if r["kind"] != "peak") == \
        [NOISE_KIND, CELL_KIND, CELL_KIND]
    kinds = _by_kind(db)
    cells, (check,) = kinds[CELL_KIND], kinds[NOISE_KIND]
    assert [c.spec[CONDITION_KEY] for c in cells] == ["A", "B"]
    assert all(c.status == "ok" and c.typed.trials == 5 for c in cells)
    m = check.typed
    assert check.status == "ok" and m.trials == 5
    assert m.noise_verdict in (FASTER, SLOWER, NO_DIFFERENCE)
    assert m.throughput_ratio_low <= m.throughput_ratio <= m.throughput_ratio_high
    assert m.noise_floor == pytest.approx(noise_floor(m.throughput_ratio_low,
                                                      m.throughput_ratio_high))
    assert m.noise_floor >= 0
    assert m.throughput_ratio == pytest.approx(
        m.tokens_per_s_global_b / m.tokens_per_s_global_a)
    assert check.spec[WORKLOAD_KEY] == cells[0].spec[WORKLOAD_KEY] == cells[1].spec[WORKLOAD_KEY]
    assert check.raw["condition_record_ids"] == {"A": cells[0].id, "B": cells[1].id}

    report = build_report([db])
    section = next(s for s in report.sections if s.key == "noise")
    assert section.title == "Noise floor" and section.tables[0].rows[0][2].startswith("±")
    compare = next(s for s in report.sections if s.key == "compare")
    assert any(p.startswith("Noise floor") and "±" in p for p in compare.paragraphs)
    assert "train" not in kinds  # the conditions are no training cells of the report


@pytest.mark.slow
def test_a_second_check_measures_again(monkeypatch, capsys, tmp_path, quick_peak):
    """Resume skips no noise cell: a noise check always measures now."""
    db = tmp_path / "results.db"
    for _ in range(2):
        code, _, err = _noise(monkeypatch, capsys, db)
        assert code == 0, err
    kinds = _by_kind(db)
    assert len(kinds[CELL_KIND]) == 4 and len(kinds[NOISE_KIND]) == 2


@pytest.mark.parametrize("trials", ["3", "0", "-1"])
def test_too_few_trials_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path, trials):
    db = tmp_path / "results.db"
    code, out, err = run_main(monkeypatch, capsys, "noise", "--trials", trials, "--db", str(db))
    assert code == 2 and out == ""
    assert err.startswith("error: trials: an A/A check needs at least 5 trials a condition")
    assert err.count("\n") == 1 and not db.exists()


def test_no_noise_check_is_said_so(tmp_path):
    """A report of machines without a noise record says none was measured, and how to."""
    db = tmp_path / "results.db"
    ResultStore(db).close()
    assert "No noise floor was measured" in noise_sentence([])
    machines = group_machines(load_records([db]))
    assert "`accelbench noise`" in noise_sentence(machines)
