"""Fit verdicts that say how they were reached: estimated, measured, or a user budget; and
--verify-fit runs the first refused length of a series to confirm it."""

import json

import pytest
from cli_run import run_main

from accelbench.config.fit import fit_basis, fit_text, refusal_reason

GIB = 1024**3


def test_each_basis_reads_back_from_its_reason():
    by_user = refusal_reason(3 * GIB, 2 * GIB, True, "x")
    estimated = refusal_reason(3 * GIB, 2 * GIB, False, "80% of the host's available memory")
    assert fit_basis("oom", by_user) == "budget"
    assert fit_basis("oom", estimated) == "estimated"
    assert fit_basis("oom", "OutOfMemoryError: CUDA out of memory") == "measured"
    assert fit_basis("ok", "") == "measured" and fit_basis("error", "boom") is None
    old = "does not fit: estimated 3.00 GiB > budget 2.00 GiB (decided before allocating)"
    assert fit_basis("oom", old) == "estimated"  # a record from before the words changed
    assert fit_text("oom", by_user) == "does not fit (user budget)"
    assert fit_text("oom", estimated) == "does not fit (estimated)"
    assert "--mem-limit 2.00 GiB" in by_user and "estimated 3.00 GiB" in estimated


TRAIN = ("train", "--model", "gpt2-tiny", "--seq", "16,64", "--micro-batch", "1", "--dtype",
         "fp32", "--steps", "2", "--warmup-steps", "1", "--device", "cpu", "--json")


@pytest.fixture
def tight_host(monkeypatch):
    """A host whose usable memory the seq-16 cell fits and the seq-64 cell does not, by the
    estimate; and whose available memory is plenty to run it."""
    from accelbench.bench import guard
    from accelbench.bench.train import cell as cell_mod

    def estimate(spec, cell, layout):
        return 1.0 * GIB if cell.seq_len == 16 else 3.0 * GIB

    monkeypatch.setattr(cell_mod, "estimate_bytes", estimate)
    monkeypatch.setattr(guard, "available_cpu_memory_bytes", lambda: int(2.5 * GIB))
    monkeypatch.setattr(cell_mod, "available_cpu_memory_bytes", lambda: 20 * GIB)


def _cells(monkeypatch, capsys, db, *extra):
    code, out, err = run_main(monkeypatch, capsys, *TRAIN, "--db", str(db), *extra)
    assert code == 0, err
    return [r for r in json.loads(out) if r["kind"] == "train"], err


@pytest.mark.slow  # runs the fit verification's cells (~1.4 s)
def test_a_refusal_says_estimated_and_verify_fit_runs_it(monkeypatch, capsys, tmp_path,
                                                          quick_peak, tight_host):
    db = tmp_path / "fit.db"
    cells, err = _cells(monkeypatch, capsys, db)
    assert [c["status"] for c in cells] == ["ok", "oom"]
    assert cells[1]["reason"].startswith("does not fit (estimated)")
    assert "does not fit (estimated)" in err  # the table says how it was decided
    cells, _ = _cells(monkeypatch, capsys, db, "--verify-fit")
    ran = cells[1]
    assert ran["status"] == "ok" and "--verify-fit ran it" in ran["reason"], ran["reason"]
    assert "does not fit (estimated)" in ran["reason"]  # what the estimate had said


def test_a_user_budget_is_named_and_not_verified(monkeypatch, capsys, tmp_path, quick_peak,
                                                 tight_host):
    cells, _ = _cells(monkeypatch, capsys, tmp_path / "b.db", "--mem-limit", "2GiB",
                      "--verify-fit")
    assert cells[1]["status"] == "oom"
    assert cells[1]["reason"].startswith("does not fit (user budget)")
