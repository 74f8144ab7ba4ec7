"""The static site (report/site/, `accelbench site`): machines ranked only on identical workload
fingerprints (near matches listed apart with what differs), trust marks on every result, the
paper's figures apart from measurements, every field shown as text, and page names made by the
site alone. Built without figures here (the browser test draws them)."""

from __future__ import annotations

import re

import pytest
from bundle_data import bundle_file, variant, with_fields
from cli_run import run_main

from accelbench.config.fit import refusal_reason
from accelbench.config.vocab import GIB
from accelbench.report.bundle import read_bundles
from accelbench.report.site import build_site
from accelbench.report.site.marks import cell_marks, overlap, peer_groups, record_marks
from accelbench.report.site.site_model import build_model
from accelbench.store.fingerprint import workload_id
from accelbench.store.record import Record

PAGE_NAME = re.compile(r"(index|figures|reference|workload-[0-9a-f]{12}|machine-[0-9a-f]{16})"
                       r"\.html")


def _bundles(tmp_path):
    """Five machines' bundles of one workload (seq 1024), one also at seq 2048."""
    return [
        bundle_file(tmp_path, "a.json", [variant("a"), variant("a", seq_len=2048)]),
        bundle_file(tmp_path, "b.json.gz", [variant("b", factor=1.005)]),  # overlaps a
        bundle_file(tmp_path, "c.json", [variant("c", factor=3.0, disturbed=True)]),
        bundle_file(tmp_path, "d.json", [variant("d", "NVIDIA A100-SXM4-80GB", factor=2.0)]),
        bundle_file(tmp_path, "e.json", [variant("e", "NVIDIA H200", factor=1.0,
                                                 device_count=8)]),
    ]


def _marks(site, wid):
    groups = peer_groups(site.cells[wid])
    return {c.best.machine.environment["host"]: [m.word for m in cell_marks(
        c, groups[(c.device_class, c.devices)], site.floors[c.best.machine.key])]
        for c in site.cells[wid]}


def ranking_rows(page: str) -> list[str]:
    """The body rows of a page's ranking table."""
    start = page.index('id="ranking"')
    body = page[page.index("<tbody>", start):page.index("</tbody>", start)]
    return re.findall(r"<tr>.*?</tr>", body)


def test_trust_marks_reproduced_once_disagreeing_and_disturbed(tmp_path):
    site = build_model(read_bundles(_bundles(tmp_path)))
    seq1024 = workload_id("train", Record.from_json(variant("x")).spec)
    marks = _marks(site, seq1024)
    assert marks["a"] == ["reproduced"] and marks["b"] == ["reproduced"]
    # c: same class and count, 3x slower, spreads apart; and its windows were disturbed
    assert marks["c"] == ["not reproduced", "disturbed window"]
    assert marks["d"] == ["measured once"]  # another device class
    # e: the same device class and count as a and b (the cell ran on 1 device of its 8)
    assert marks["e"] == ["reproduced"]
    seq2048 = next(w for w in site.cells if w != seq1024)
    assert _marks(site, seq2048) == {"a": ["measured once"]}


def test_overlap_needs_both_spreads():
    from accelbench.report.cells import Rate

    assert overlap(Rate(10, 9, 11), Rate(12, 10.5, 13)) is True
    assert overlap(Rate(10, 9, 11), Rate(12, 11.5, 13)) is False
    assert overlap(Rate(10), Rate(10, 9, 11)) is None


def test_a_spread_wider_than_the_noise_floor_is_marked(tmp_path):
    noise = with_fields(variant("a"), kind="noise", metrics={"noise_floor": 0.001,
                                                             "trials": 3})
    site = build_model(read_bundles([bundle_file(tmp_path, "a.json", [variant("a"), noise])]))
    (wid,) = site.cells
    (words,) = _marks(site, wid).values()
    assert words == ["measured once", "spread above noise floor"]
    assert site.floors[site.machines[0].key] == 0.001


def test_a_fit_decided_by_estimate_is_marked_estimated():
    refused = Record.from_json(with_fields(
        variant("a"), status="oom", reason=refusal_reason(90 * GIB, 80 * GIB, False, "HBM")))
    assert [m.word for m in record_marks(refused)] == ["estimated"]
    assert record_marks(Record.from_json(variant("a"))) == []


def test_only_identical_workloads_are_ranked_together(monkeypatch, capsys, tmp_path):
    paths = _bundles(tmp_path)
    out = tmp_path / "site"
    code, stdout, err = run_main(monkeypatch, capsys, "site", *map(str, paths), "--out",
                                 str(out), "--no-figures", "--baseline", "1")
    assert code == 0 and stdout.strip() == str(out / "index.html"), err
    seq1024 = workload_id("train", Record.from_json(variant("x")).spec)
    seq2048 = workload_id("train", Record.from_json(variant("x", seq_len=2048)).spec)
    page = (out / f"workload-{seq1024}.html").read_text()
    assert len(ranking_rows(page)) == 5  # the five machines of this workload
    assert "seq_len: 1024 vs 2048" in page  # the near match, listed apart with what differs
    assert f"workload-{seq2048}.html" in page[page.index("Near matches"):]
    other = (out / f"workload-{seq2048}.html").read_text()
    assert len(ranking_rows(other)) == 1 and "seq_len: 2048 vs 1024" in other
    # ranked fastest first (c, 3x slower, last), each with its verdict against the baseline
    rows = ranking_rows(page)
    assert "host c" in rows[-1] and "A100" in rows[-2] and "baseline" in "".join(rows)
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == sorted(
        ["index.html", "figures.html", "reference.html", f"workload-{seq1024}.html",
         f"workload-{seq2048}.html"] + [p.name for p in out.glob("machine-*.html")])
    assert len(list(out.glob("machine-*.html"))) == 5


def test_every_field_is_text_and_no_name_comes_from_a_bundle(tmp_path):
    script = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    hostile = with_fields(variant("../../etc/" + script, device_name=script), reason=script)
    record = __import__("json").loads(hostile)
    record["spec"]["model_name"] = "../../../tmp/evil" + script
    record["spec"]["study"] = {"name": script}
    text = __import__("json").dumps(record)
    paths = [bundle_file(tmp_path, "../" + tmp_path.name + "/x.json", [text, variant("a")])]
    built = build_site(paths, tmp_path / "site", figures=False)
    files = sorted(p.relative_to(built.out_dir).as_posix()
                   for p in built.out_dir.rglob("*") if p.is_file())
    assert all(PAGE_NAME.fullmatch(f) for f in files), files
    assert not (tmp_path / "tmp").exists()
    for f in files:
        html = (built.out_dir / f).read_text()
        assert html.count("<script>") == 1 and "<img" not in html, f  # ours only
        assert "onerror=alert" not in html.replace("onerror=alert(2)&gt;", "")
    machine = next(built.out_dir.glob("machine-*.html")).read_text()
    index = (built.out_dir / "index.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in machine + index


def test_the_paper_s_figures_stay_apart(monkeypatch, capsys, tmp_path):
    paper = tmp_path / "paper.json"
    assert run_main(monkeypatch, capsys, "publish", "--reference", "--out", str(paper))[0] == 0
    built = build_site([paper, bundle_file(tmp_path, "a.json", [variant("a")])],
                       tmp_path / "site", figures=False)
    reference = (built.out_dir / "reference.html").read_text()
    assert reference.count("published (reference)") == 12 and "Emani et al. 2023" in reference
    for page in built.out_dir.glob("workload-*.html"):
        assert "Emani" not in page.read_text() and "reference)</span>" not in page.read_text()
    assert built.machines == 1  # the reference bundle adds no machine


def test_no_bundle_is_one_line(monkeypatch, capsys, tmp_path):
    code, out, err = run_main(monkeypatch, capsys, "site", "--out", str(tmp_path / "s"))
    assert code == 2 and err.count("\n") == 1


@pytest.mark.parametrize("baseline", ["9", "nothing like it"])
def test_a_baseline_that_names_no_machine_is_refused(monkeypatch, capsys, tmp_path, baseline):
    path = bundle_file(tmp_path, "a.json", [variant("a")])
    code, out, err = run_main(monkeypatch, capsys, "site", str(path), "--out",
                              str(tmp_path / "s"), "--no-figures", "--baseline", baseline)
    assert (code, out, err.count("\n")) == (2, "", 1) and "error: baseline:" in err


def test_many_bundles_are_read_on_every_core_and_a_bad_one_is_one_line(monkeypatch, capsys,
                                                                       tmp_path):
    from accelbench.report.bundle import PARALLEL_FROM

    paths = [bundle_file(tmp_path, f"{n}.json", [variant(f"h{n}")])
             for n in range(PARALLEL_FROM)]
    site = build_model(read_bundles(paths))
    assert [m.environment["host"] for m in site.machines] == [f"h{n}" for n in range(PARALLEL_FROM)]
    bad = tmp_path / "bad.json"
    bad.write_text(paths[3].read_text().replace('\\"host\\": \\"h3\\"', '\\"host\\": \\"x\\"'))
    assert bad.read_text() != paths[3].read_text()
    code, out, err = run_main(monkeypatch, capsys, "site", *map(str, paths), str(bad), "--out",
                              str(tmp_path / "s"), "--no-figures")
    assert (code, out, err.count("\n")) == (2, "", 1) and "'bad.json' was altered" in err, err


def test_reproduction_counts_by_bisection_as_pair_by_pair():
    import random

    from accelbench.report.cells import Rate
    from accelbench.report.compare import Best
    from accelbench.report.site.marks import reproduction
    from accelbench.report.site.site_model import Ranked

    rng = random.Random(1)
    cells = []
    for n in range(300):
        low = rng.uniform(0, 100)
        total = Rate(low + 1, low, low + rng.uniform(0, 5)) if n % 7 else Rate(low)
        cells.append(Ranked(Best(None, None, total, total), f"b{n % 40}", "cuda X", 1))
    (peers,) = peer_groups(cells).values()
    for cell in cells:
        others = [o for o in cells if o.bundle != cell.bundle]
        agree = sum(bool(overlap(cell.best.total, o.best.total)) for o in others)
        mark = reproduction(cell, peers)
        assert mark.kind == ("reproduced" if agree else "disagrees"), mark
        assert not agree or mark.why.startswith(f"{agree} of {len(others)} cell(s)")
