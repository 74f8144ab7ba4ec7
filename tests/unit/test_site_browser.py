"""The demo site in headless Chromium: `accelbench publish` on every committed example database
(the two H200 runs under docs/gpu-runs/, and the CPU quick study's under docs/examples/ where
its database is committed), the paper's reference bundle, and `accelbench site` over them with
its figures; then a machine page and a ranking page loaded in Chromium: their tables sort and
filter in the page (the actions given in the URL's fragment, run by the page's own script), the
figures load, and the page asks the network for nothing (Chromium's net log: no request that a
page started; a control page with an outside image shows the check sees one). Skipped where
Chromium is not installed (.ci/run installs Debian's)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from bundle_data import ROOT, bundle_file, variant

from accelbench.report.bundle_publish import PublishOptions, publish
from accelbench.report.site import build_site

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=5000")
# the two H200 runs' databases, and the CPU quick study's where its database is committed
EXAMPLES = sorted((ROOT / "docs" / "gpu-runs").glob("*/*.db")) + sorted(
    (ROOT / "docs" / "examples").glob("*/*.db"))


def _chromium(tmp: Path, url: str) -> tuple[str, list[str]]:
    """The DOM after load (and the fragment's actions), and the URLs the page requested."""
    if CHROMIUM is None:
        reason = "chromium not installed (Debian: apt-get install chromium; .ci/run installs it)"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    n = len(list(tmp.glob("profile*")))
    log = tmp / f"net{n}.json"
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / f'profile{n}'}",
                           f"--log-net-log={log}", "--dump-dom", url],
                          capture_output=True, text=True, timeout=120)
    return done.stdout, _page_requests(log)


def _page_requests(log: Path) -> list[str]:
    """URLs of requests a page started (Chromium's own background ones have no origin)."""
    data = json.loads(log.read_text())
    start = data["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    starts = [e.get("params", {}) for e in data["events"] if e["type"] == start]
    return [p["url"] for p in starts if "url" in p and p.get("initiator") != "not an origin"
            and not p["url"].startswith(("file:", "data:"))]


def _rows(dom: str, table: str) -> list[tuple[str, bool]]:
    """(text, hidden) of a table's body rows, in the DOM's order."""
    body = dom[dom.index(f'id="{table}"'):]
    body = body[body.index("<tbody>"):body.index("</tbody>")]
    return [(re.sub(r"<[^>]+>", "", row), "display: none" in style)
            for style, row in re.findall(r"<tr( style=\"[^\"]*\")?>(.*?)</tr>", body, re.S)]


def _column(dom: str, table: str, col: int) -> list[tuple[str, str | None, bool]]:
    """(text, data-v, hidden) of one column's cells, in the DOM's row order."""
    body = dom[dom.index(f'id="{table}"'):]
    body = body[body.index("<tbody>"):body.index("</tbody>")]
    cells = []
    for row in re.findall(r"<tr( style=\"[^\"]*\")?>(.*?)</tr>", body, re.S):
        tds = re.findall(r"<td( data-v=\"([^\"]*)\")?>(.*?)</td>", row[1], re.S)
        cells.append((re.sub(r"<[^>]+>", "", tds[col][2]), tds[col][1] or None,
                      "display: none" in row[0]))
    return cells


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """The demo site: every committed example database published, plus the reference."""
    tmp = tmp_path_factory.mktemp("demo")
    assert len(EXAMPLES) >= 2
    bundles = [publish(PublishOptions(out=tmp / f"{i}.json.gz", db=db)).path
               for i, db in enumerate(EXAMPLES)]
    bundles.append(publish(PublishOptions(out=tmp / "paper.json", reference=True)).path)
    return build_site(bundles, tmp / "site").out_dir


def test_the_demo_machine_page_sorts_and_filters(demo, tmp_path):
    page = max(demo.glob("machine-*.html"), key=lambda p: p.stat().st_size)  # the most records
    plain, requests = _chromium(tmp_path, page.as_uri())
    assert 'data-ready="yes"' in plain and requests == []
    kinds = [text for text, _, _ in _column(plain, "records", 1)]
    assert len(kinds) >= 40 and kinds != sorted(kinds)  # as stored: oldest first
    dom, requests = _chromium(tmp_path, page.as_uri() + "#sort=records:1:desc")
    assert [t for t, _, _ in _column(dom, "records", 1)] == sorted(kinds, reverse=True)
    assert requests == []
    dom, _ = _chromium(tmp_path, page.as_uri() + "#filter=records:block%20bf16")
    shown = [text for text, hidden in _rows(dom, "records") if not hidden]
    expected = [text for text, _ in _rows(plain, "records") if "block" in text.lower()
                and "bf16" in text.lower()]
    assert 0 < len(shown) == len(expected) < len(kinds) and shown == expected
    assert f'data-shown="{len(shown)}"' in dom


def test_the_demo_index_figures_and_reference_load_without_the_network(demo, tmp_path):
    for name in ("index.html", "figures.html", "reference.html"):
        dom, requests = _chromium(tmp_path, (demo / name).as_uri())
        assert 'data-ready="yes"' in dom and requests == [], name
    figures = (demo / "figures.html").read_text()
    drawn = re.findall(r'<img src="(figures/figure\d\d\.svg)"', figures)
    assert len(drawn) >= 3 and all((demo / f).stat().st_size > 1000 for f in drawn)
    # the check is not vacuous: a page with an outside image is seen asking for it
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://127.0.0.1:9/x.png"></body></html>')
    assert _chromium(tmp_path, control.as_uri())[1] == ["http://127.0.0.1:9/x.png"]


def test_a_ranking_page_sorts_by_number_and_filters(tmp_path):
    hosts = {"alpha": 1.0, "bravo": 0.5, "charlie": 2.0, "delta": 1.4}
    paths = [bundle_file(tmp_path, f"{h}.json", [variant(h, factor=f)])
             for h, f in hosts.items()]
    built = build_site(paths, tmp_path / "site", figures=False)
    (page,) = built.out_dir.glob("workload-*.html")
    plain, requests = _chromium(tmp_path, page.as_uri())
    values = [float(v) for _, v, _ in _column(plain, "ranking", 3)]
    assert len(values) == 4 and values == sorted(values, reverse=True) and requests == []
    dom, _ = _chromium(tmp_path, page.as_uri() + "#sort=ranking:3:asc")
    assert [float(v) for _, v, _ in _column(dom, "ranking", 3)] == sorted(values)
    dom, _ = _chromium(tmp_path, page.as_uri() + "#filter=ranking:HOST%20charlie")
    shown = [t for t, _, hidden in _column(dom, "ranking", 1) if not hidden]
    assert len(shown) == 1 and "host charlie" in shown[0]
