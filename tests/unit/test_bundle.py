"""The bundle format (report/bundle.py, `accelbench publish`): a database's records carried byte
for byte with their machines, peaks and provenance, noise floor and workload fingerprints; read
back exactly and imported exactly; an altered bundle detected; newer versions refused with one
line; a version-1 store's records upgraded on read; the paper's figures as a reference bundle
that is never stored as measurements."""

from __future__ import annotations

import json
import sqlite3

import pytest
from bundle_data import (
    H200_DB,
    TRIALS_DB,
    V1_DB,
    bundle_file,
    forged,
    stored_texts,
    variant,
    with_fields,
)
from cli_run import run_main

from accelbench.config.errors import ConfigError
from accelbench.config.record_kinds import SCHEMA_VERSION
from accelbench.report.bundle import BUNDLE_VERSION, read_bundle
from accelbench.report.site import build_site
from accelbench.store.fingerprint import workload_id
from accelbench.store.record import Record


def _publish(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    return run_main(monkeypatch, capsys, "publish", *args)


@pytest.mark.parametrize("name", ["h200.json", "h200.json.gz"])
def test_a_bundle_round_trips_exactly(monkeypatch, capsys, tmp_path, name):
    out = tmp_path / name
    code, stdout, err = _publish(monkeypatch, capsys, "--db", str(H200_DB), "--out", str(out))
    assert code == 0 and stdout.strip() == str(out), err
    assert out.read_bytes()[:2] == (b"\x1f\x8b" if name.endswith(".gz") else b"{\n")
    bundle = read_bundle(out)
    stored = stored_texts(H200_DB)
    assert list(bundle.texts) == stored  # byte for byte
    again = [Record.from_json(t) for t in stored]
    assert [r.typed for r in bundle.records] == [r.typed for r in again]  # intervals included
    assert any(r.typed.intervals for r in bundle.records if r.kind == "block")
    cells = {workload_id(r.kind, r.spec) for r in again} - {None}
    assert set(bundle.header["workloads"]) == cells and len(cells) > 10
    (machine,) = bundle.header["machines"]
    assert machine["records"] == 24 and machine["environment"]["device_name"] == "NVIDIA H200"
    sources = {p["precision"]: p["source"] for p in machine["peaks"]}
    assert sources["bf16"].startswith("datasheet dense (h200): NVIDIA datasheet")
    assert machine["noise_check"] is None  # no A/A check in that run
    # imported into a new database: the same stored texts; a second import adds nothing
    db = tmp_path / "copy.db"
    for added in (24, 0):
        code, _, err = run_main(monkeypatch, capsys, "results", "import", str(out), "--db",
                                str(db))
        assert code == 0 and f"imported {added} records" in err
    assert stored_texts(db) == stored


def test_a_version_1_store_is_carried_as_stored_and_upgraded_on_read(monkeypatch, capsys,
                                                                      tmp_path):
    out = tmp_path / "old.json"
    assert _publish(monkeypatch, capsys, "--db", str(V1_DB), "--out", str(out))[0] == 0
    bundle = read_bundle(out)
    assert list(bundle.texts) == stored_texts(V1_DB)
    assert all(json.loads(t).get("schema_version", 1) == 1 for t in bundle.texts)
    assert {r.schema_version for r in bundle.records} == {SCHEMA_VERSION}
    train = next(r for r in bundle.records if r.kind == "train" and r.status == "ok")
    assert "tokens_per_step_global" in train.metrics and "tokens_per_step" not in train.metrics


def _one_line_refusal(monkeypatch, capsys, path, tmp_path, expected: str) -> None:
    """`results import` and `site` both refuse it: exit 2, one line, nothing written."""
    db = tmp_path / "target.db"
    code, out, err = run_main(monkeypatch, capsys, "results", "import", str(path), "--db",
                              str(db))
    assert (code, out, err.count("\n")) == (2, "", 1) and expected in err, err
    assert not db.exists()
    site = tmp_path / "site"
    code, out, err = run_main(monkeypatch, capsys, "site", str(path), "--out", str(site),
                              "--no-figures")
    assert (code, out, err.count("\n")) == (2, "", 1) and expected in err, err
    assert not site.exists()


def test_an_altered_bundle_is_detected(monkeypatch, capsys, tmp_path):
    good = bundle_file(tmp_path, "good.json", [variant("a"), variant("b")])

    def faster(body):  # one digit of one record's median step time
        changed = body["records"][0].replace('"step_time_s_median": 0.6',
                                             '"step_time_s_median": 0.5', 1)
        assert changed != body["records"][0]
        body["records"][0] = changed

    altered = forged(good, tmp_path / "altered.json", faster, recompute=False)
    _one_line_refusal(monkeypatch, capsys, altered, tmp_path,
                      "was altered: its sha256 does not match its contents")

    def rehosted(body):  # a consistent forgery of the summary: never read
        body["machines"][0]["environment"]["host"] = "elsewhere"

    summary = forged(good, tmp_path / "summary.json", rehosted)
    built = build_site([summary], tmp_path / "forged-site", figures=False)
    index = (built.out_dir / "index.html").read_text()
    assert "elsewhere" not in index and "host a" in index


@pytest.mark.parametrize("field,value", [("bundle_version", BUNDLE_VERSION + 1),
                                         ("schema_version", SCHEMA_VERSION + 1)])
def test_a_newer_bundle_is_refused_with_one_line(monkeypatch, capsys, tmp_path, field, value):
    good = bundle_file(tmp_path, "good.json", [variant("a")])
    newer = forged(good, tmp_path / "newer.json", lambda body: body.update({field: value}))
    _one_line_refusal(monkeypatch, capsys, newer, tmp_path,
                      f"has {field} {value}, written by a newer accelbench")


def test_a_newer_record_inside_a_bundle_is_refused(monkeypatch, capsys, tmp_path):
    texts = [with_fields(variant("a"), schema_version=SCHEMA_VERSION + 1)]
    with pytest.raises(Exception, match="written by a newer accelbench"):
        bundle_file(tmp_path, "x.json", texts)  # the writer checks its records too
    good = bundle_file(tmp_path, "good.json", [variant("a")])
    newer = forged(good, tmp_path / "newer.json",
                   lambda body: body["records"].__setitem__(0, texts[0]))
    _one_line_refusal(monkeypatch, capsys, newer, tmp_path,
                      f"record 1 is not a record: schema_version is {SCHEMA_VERSION + 1} "
                      "(written by a newer accelbench")


def test_publish_selects_runs_with_their_machines_peaks(monkeypatch, capsys, tmp_path):
    records = [Record.from_json(t) for t in stored_texts(H200_DB)]
    run = next(r.run_id for r in records if r.kind == "train")
    out = tmp_path / "run.json"
    code, _, err = _publish(monkeypatch, capsys, "--db", str(H200_DB), "--run", run, "--out",
                            str(out))
    assert code == 0, err
    carried = read_bundle(out).records
    assert {r.run_id for r in carried} == {run}
    assert len(carried) == sum(r.run_id == run for r in records)
    code, out_text, err = _publish(monkeypatch, capsys, "--db", str(H200_DB), "--run", "nope",
                                   "--out", str(tmp_path / "none.json"))
    assert (code, out_text) == (2, "") and err.startswith("error: run: no run 'nope'")
    assert not (tmp_path / "none.json").exists()


def test_publish_refuses_a_missing_database_and_a_bad_out(monkeypatch, capsys, tmp_path):
    code, _, err = _publish(monkeypatch, capsys, "--db", str(tmp_path / "none.db"), "--out",
                            str(tmp_path / "b.json"))
    assert code == 2 and err.startswith("error: db: no results database at")
    code, _, err = _publish(monkeypatch, capsys, "--db", str(TRIALS_DB), "--out",
                            str(tmp_path / "missing" / "b.json"))
    assert code == 2 and "does not exist" in err and not (tmp_path / "none.db").exists()


def test_the_paper_s_figures_are_a_reference_bundle_never_stored(monkeypatch, capsys,
                                                                  tmp_path):
    out = tmp_path / "paper.json"
    assert _publish(monkeypatch, capsys, "--reference", "--out", str(out))[0] == 0
    bundle = read_bundle(out)
    assert bundle.contents == "reference" and bundle.records == ()
    table2 = {e["system"]: e["value"] for e in bundle.published if e["figure"] == "table II"}
    assert table2["A100"] == 0.758 and table2["CS-2"] == 0.957
    assert all(e["source"].startswith("Emani et al. 2023") for e in bundle.published)
    db = tmp_path / "t.db"
    code, _, err = run_main(monkeypatch, capsys, "results", "import", str(out), "--db", str(db))
    assert code == 2 and "is a reference bundle" in err and not db.exists()
    mixed = forged(out, tmp_path / "mixed.json",
                   lambda body: body["records"].append(variant("a")))
    with pytest.raises(ConfigError, match="reference bundle holding"):
        read_bundle(mixed)
    with pytest.raises(ConfigError, match="takes no --db or --run"):
        from accelbench.report.bundle_publish import PublishOptions, publish
        publish(PublishOptions(out=tmp_path / "p.json", db=H200_DB, reference=True))


def test_merge_refuses_a_row_an_older_build_let_in(monkeypatch, capsys, tmp_path):
    bad = tmp_path / "bad.db"
    assert run_main(monkeypatch, capsys, "results", "import",
                    str(bundle_file(tmp_path, "b.json", [variant("a")])), "--db", str(bad))[0] == 0
    with sqlite3.connect(bad) as conn:  # a row written around the checks, as an old build did
        conn.execute("INSERT INTO results (run_id, kind, status, created_utc, schema_version, "
                     "record_json, uid) VALUES ('r', 'train', 'ok', 't', 2, ?, 'ab')",
                     (with_fields(variant("a"), metrics=7),))
    into = tmp_path / "into.db"
    code, out, err = run_main(monkeypatch, capsys, "results", "merge", str(bad), "--into",
                              str(into))
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert "record 2 is not a record: metrics is an integer" in err and not into.exists()


def test_a_long_run_s_record_over_a_megabyte_travels(tmp_path):
    r = json.loads(variant("a"))
    r["raw"]["rank0"]["step_times_s"] = [0.5 + n * 1e-9 for n in range(100_000)]
    text = json.dumps(r, sort_keys=True)
    assert len(text) > 1_200_000  # past the 1,000,000 characters a string in a record may have
    bundle = read_bundle(bundle_file(tmp_path, "long.json.gz", [text]))
    assert bundle.texts == (text,) and len(bundle.records[0].raw["rank0"]["step_times_s"]) == 1e5
