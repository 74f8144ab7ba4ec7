"""Hostile files: every file `results import` reads and every bundle `accelbench site` reads is
untrusted. Each case below is refused with exit 2 and one line naming what is wrong, before
anything is written (the database's bytes unchanged, no site folder made), or, where it is
well-formed but carries markup, shown as text; no case ends in a traceback (run_main fails the
test on any exception). And a record an older build let into a database is skipped by every
reader with a warning naming it, never a traceback."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3

import pytest
from bundle_data import bundle_file, forged, template, variant, with_fields
from cli_run import run_main

from accelbench.config.record_kinds import SCHEMA_VERSION
from accelbench.store import validate

DEEP = 200_000


def _record(**changes) -> str:
    return with_fields(variant("h"), **changes)


def _metrics(**values) -> str:
    r = json.loads(variant("h"))
    r["metrics"].update(values)
    return json.dumps(r)


def _spec(**values) -> str:
    r = json.loads(variant("h"))
    r["spec"].update(values)
    return json.dumps(r)


def _raw(**values) -> str:
    r = json.loads(variant("h"))
    r["raw"].update(values)
    return json.dumps(r)


def _v1_broken() -> str:
    r = template()
    r["schema_version"] = 1
    r["metrics"] = {"mem_peak_bytes": "lots", "mem_base_bytes": 3}
    return json.dumps(r)


# name -> (the file's bytes, what the one line says)
IMPORT_FILES = {
    "array-200000-deep": ("[" * DEEP + "]" * DEEP, f"nested {DEEP} deep"),
    "object-200000-deep": ('{"a":' * DEEP + "1" + "}" * DEEP, f"nested {DEEP} deep"),
    "line-5000-deep": ('{"kind": ' + "[" * 5000 + "]" * 5000 + "}\n", "nested 5001 deep"),
    "spec-a-string-metrics-a-number": (_record(spec="x", metrics=3) + "\n",
                                       "spec is a string; allowed: object"),
    "metrics-of-wrong-types": (_metrics(mfu="fast") + "\n",
                               "metrics.mfu is a string; allowed: number or null"),
    "per-rank-list-with-text": (_metrics(step_time_s_median_per_rank=[0.5, "x"]) + "\n",
                                "metrics.step_time_s_median_per_rank is a list"),
    "intervals-not-pairs": (_metrics(intervals={"mfu": "wide"}) + "\n", "metrics.intervals"),
    "status-not-allowed": (_record(status="pwned") + "\n", "status is 'pwned'; allowed: ok"),
    "kind-a-path": (_record(kind="../../etc/passwd") + "\n", "kind is '../../etc/passwd'"),
    "future-schema": (_record(schema_version=SCHEMA_VERSION + 7) + "\n",
                      "written by a newer accelbench"),
    "schema-version-text": (_record(schema_version="2") + "\n",
                            "schema_version is a string; allowed: integer"),
    "huge-reason": (_record(reason="A" * 2_000_000) + "\n", "string of 2,000,000 characters"),
    "huge-key": (_metrics(**{"k" * 1_500_000: 1}) + "\n", "string of 1,500,000 characters"),
    "unknown-field-path": (_record(path="/etc/passwd") + "\n", "unknown field 'path'"),
    "uid-a-path": (_record(uid="../../x") + "\n", "uid is not a hash"),
    "workload-id-a-path": (_spec(workload_id="../../../evil") + "\n",
                           "spec.workload_id is not a hash"),
    "model-nested": (_spec(model={"d_model": {"x": 1}}) + "\n", "spec.model.d_model"),
    "layout-dp-text": (_spec(layout={"dp": "two"}) + "\n", "spec.layout.dp is a string"),
    "seq-len-text": (_spec(seq_len="long") + "\n",
                     "spec.seq_len is a string; allowed: integer or null"),  # RecordSpec's
    "benchmark-null": (_spec(benchmark=None) + "\n", "spec.benchmark is null; allowed: string"),
    "trial-values-text": (_raw(trial_values={"step_time_s_median": ["a", "b"]}) + "\n",
                          "raw.trial_values"),
    "environment-count-text": (_record(environment={"device_count": "many"}) + "\n",
                               "environment.device_count is a string"),
    "scale-row-of-text": (_record(kind="scale", metrics={"rows": [{"devices": "all"}]}) + "\n",
                          "metrics.rows is a list; allowed: list of (object (ScaleRow))"),
    "not-json": ("this is not JSON\n", "line 1 is not JSON"),
    "not-utf8": (b"\xff\xfe\x00garbage", "cannot be read"),
    "integer-of-10000-digits": ('{"kind": ' + "9" * 10_000 + "}\n", "not JSON"),
    "array-of-numbers": ("[1, 2, 3]", "record 1 is not a record: is an integer"),
    "v1-record-that-cannot-upgrade": (_v1_broken() + "\n", "a version-1 record that cannot"),
}


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def db(tmp_path, monkeypatch, capsys):
    """A database holding one good record."""
    path = tmp_path / "results.db"
    good = tmp_path / "good.jsonl"
    good.write_text(variant("good") + "\n")
    assert run_main(monkeypatch, capsys, "results", "import", str(good), "--db", str(path))[0] == 0
    return path


@pytest.mark.parametrize("name", IMPORT_FILES)
def test_a_hostile_import_file_is_refused_with_one_line(monkeypatch, capsys, tmp_path, db,
                                                         name):
    content, expected = IMPORT_FILES[name]
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = _sha(db)
    code, out, err = run_main(monkeypatch, capsys, "results", "import", str(path), "--db",
                              str(db))
    assert (code, out, err.count("\n")) == (2, "", 1), err[:500]
    assert err.startswith("error: FILE: ") and expected in err, err[:500]
    assert len(err) < 1000  # one readable line, not the file
    assert _sha(db) == before


def _bundle_cases(tmp_path):
    """name -> (a hostile bundle file, what the one line says)."""
    good = bundle_file(tmp_path, "good.json", [variant("a")])

    def put(field, value):
        return lambda body: body.update({field: value})

    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * 3_000_000))
    deep = tmp_path / "deep.json"
    deep.write_text('{"format": "accelbench-bundle", "records": ' + "[" * DEEP + "]" * DEEP
                    + "}")
    return {
        "altered": (forged(good, tmp_path / "altered.json",
                           lambda b: b["records"].__setitem__(0, b["records"][0].replace(
                               '"host": "a"', '"host": "b"')), recompute=False),
                    "was altered"),
        "future-bundle-version": (forged(good, tmp_path / "v.json", put("bundle_version", 9)),
                                  "written by a newer accelbench"),
        "future-schema": (forged(good, tmp_path / "s.json", put("schema_version", 9)),
                          "written by a newer accelbench"),
        "header-nested-deep": (deep, f"nested {DEEP + 1} deep"),
        "gzip-bomb": (bomb, "expands past"),
        "records-not-text": (forged(good, tmp_path / "n.json", put("records", [123])),
                             "record 1 is not JSON text"),
        "unknown-header-field": (forged(good, tmp_path / "u.json", put("out_dir", "/etc")),
                                 "has an unknown field 'out_dir'"),
        "record-of-wrong-types": (forged(good, tmp_path / "w.json", lambda b: b["records"]
                                         .__setitem__(0, _metrics(mfu=[1]))),
                                  "metrics.mfu is a list"),
        "machines-not-a-list": (forged(good, tmp_path / "f.json", put("machines", "x")),
                                "field machines is missing or not a list"),
        "not-a-bundle": (forged(good, tmp_path / "x.json", put("format", "other")),
                         "is not an accelbench bundle|record 1 is not a record: kind is missing"),
    }


def test_hostile_bundles_are_refused_and_nothing_is_written(monkeypatch, capsys, tmp_path, db):
    import accelbench.report.bundle as bundle_module

    monkeypatch.setattr(bundle_module, "MAX_FILE_BYTES", 2_000_000)  # the bomb's 3 MB is past
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("the site built before")
    before = _sha(db)
    cases = _bundle_cases(tmp_path)
    assert len(cases) + len(IMPORT_FILES) >= 30
    for name, (path, expected) in cases.items():
        for args in (("results", "import", str(path), "--db", str(db)),
                     ("site", str(path), "--out", str(site), "--no-figures")):
            code, out, err = run_main(monkeypatch, capsys, *args)
            assert (code, out, err.count("\n")) == (2, "", 1), (name, err[:500])
            assert any(e in err for e in expected.split("|")), (name, err[:500])
    assert _sha(db) == before
    assert [p.name for p in site.iterdir()] == ["index.html"]
    assert (site / "index.html").read_text() == "the site built before"


def _let_in(db, text: str) -> None:
    """A row written around the checks, as an older build could."""
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO results (run_id, kind, status, created_utc, schema_version, "
                     "record_json, uid) VALUES ('r', 'train', 'ok', 't', 2, ?, NULL)", (text,))


def test_every_reader_skips_a_bad_stored_record_with_a_warning(monkeypatch, capsys, tmp_path,
                                                                db):
    _let_in(db, _metrics(mfu="fast"))  # record 2
    _let_in(db, "[" * 5000 + "]" * 5000)  # record 3
    for args in (("results", "list", "--db", str(db)),
                 ("results", "export", "--format", "json", "--db", str(db)),
                 ("publish", "--db", str(db), "--out", str(tmp_path / "b.json"))):
        validate._WARNED.clear()  # each command is a process of its own: warned once each
        code, out, err = run_main(monkeypatch, capsys, *args)
        assert code == 0, (args, err)
        assert f"warning: '{db}' record 2 skipped: metrics.mfu is a string" in err, err
        assert f"warning: '{db}' record 3 skipped: nested 5000 deep" in err, err
    validate._WARNED.clear()
    code, out, err = run_main(monkeypatch, capsys, "results", "show", "2", "--db", str(db))
    assert code == 2 and "no record 2" in err and "record 2 skipped" in err


@pytest.mark.slow
def test_the_report_skips_a_bad_stored_record(monkeypatch, capsys, tmp_path, db):
    _let_in(db, _record(spec="x", metrics=3))
    code, out, err = run_main(monkeypatch, capsys, "report", "--db", str(db), "--out",
                              str(tmp_path / "report"))
    assert code == 0 and "record 2 skipped: spec is a string" in err, err
