"""The report: real databases made by tiny real sweeps, rendered to HTML, Markdown, PNG and SVG
with every figure and table present and no broken image; two databases are two machines, with
what differs between their runs listed; the page checked in headless Chromium where it exists."""

from __future__ import annotations

import base64
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from accelbench.bench.gemm_peak import SweepPeak
from accelbench.bench.outcome import Outcome
from accelbench.bench.recording.recorder import Recorder
from accelbench.bench.train.search import run_longest_seq_sweep
from accelbench.bench.train.spec import TrainSpec
from accelbench.bench.train.sweep import run_train_sweep
from accelbench.cli.main import main
from accelbench.config.errors import ConfigError
from accelbench.config.presets import get_preset
from accelbench.hardware.detect import resolve_device
from accelbench.hardware.environment import environment
from accelbench.report import build_report, make_report
from accelbench.report.draw import render
from accelbench.report.machines import (
    fingerprint,
    group_machines,
    machine_name,
    pick_baseline,
    short_version,
)
from accelbench.store.record import Record
from accelbench.store.store import ResultStore
from accelbench.workloads.block.runner import BlockSpec, run_block_sweep
from accelbench.workloads.scale.runner import ScaleSpec, summary_outcome
from accelbench.workloads.train.sparsity_section import sparsity_section

# one test process (xdist group) writes the reports most tests read
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_report")]

TINY = get_preset("gpt2-tiny").with_changes(vocab_size=512, n_positions=128)
FIGURES = ("fig3_block_tflops", "fig4_block_tokens", "table2_scaling", "table3_seq_tokens",
           "fig6_gas", "fig7_sparsity", "table4_genslm_codons", "compare_machines")
SECTIONS = ("Machines", "Transformer block (figures 3-4)", "Device scaling (table II)",
            "Sequence length (table III)", "Gradient accumulation (figure 6)",
            "Weight sparsity (figure 7)", "GenSLM (table IV)", "Comparing machines",
            "Fairness: what differs between the machines' runs")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# machine B: the same records, as if measured on a GPU with another torch
GPU_ENV = {"device_type": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 1,
           "device_spec_key": "h100-sxm", "torch": "2.11.0+cu128"}
# machine B's torch in the report's databases: another version than this machine's, whichever
# that is (a difference the fairness section must list)
B_TORCH = "2.12.0" if short_version(torch.__version__) == "2.11.0" else "2.11.0"
B_NAME = f"NVIDIA H100 80GB HBM3 x1, torch {B_TORCH}"


def _scale_records(cells: list[Outcome], record: Recorder) -> None:
    """A scaling summary made by the library (bench.scale.summary_outcome) from two real cells
    standing in for 1 and 2 devices (a real scale run launches torchrun per count: too slow
    for a unit test), stored with its cells under one run id as `scale` stores them."""
    counted = [replace(o, spec={**o.spec, "scale_mode": "weak", "scale_devices": n})
               for n, o in zip((1, 2), cells, strict=True)]
    for outcome in counted:
        record(outcome)
    base = TrainSpec(model=TINY, seq_lens=(32,), micro_batches=(1,), dtypes=("fp32",),
                     device="cpu")
    record(summary_outcome(ScaleSpec(base, devices=(1, 2)), counted))


def _measure(store: ResultStore) -> None:
    """Real records of every workload the report reads, with 'does not fit' cells."""
    env = environment(resolve_device("cpu"))
    record = Recorder(store, env)
    block = run_block_sweep(BlockSpec(TINY, seq_len=16, batches=(1, 2), dtypes=("fp32",),
                                      device="cpu", repeats=2, warmup=1), record)
    run_block_sweep(BlockSpec(TINY, seq_len=16, batches=(64,), dtypes=("fp32",), device="cpu",
                              repeats=2, warmup=1, mem_limit_bytes=1000), record)
    m = block[0].metrics  # the block sweep's measured peak, shared so it is measured once
    peak = SweepPeak("fp32", m["peak_flops_per_s_per_device"], m["peak_precision"],
                     m["peak_label"])
    train = dict(model=TINY, dtypes=("fp32",), steps=3, warmup_steps=1, device="cpu",
                 peaks=(peak,))
    cells = run_train_sweep(TrainSpec(seq_lens=(32,), micro_batches=(1, 2), gas=(1, 2),
                                      **train), Recorder(store, env))
    run_train_sweep(TrainSpec(seq_lens=(64,), micro_batches=(2,), mem_limit_bytes=1000,
                              **train), Recorder(store, env))  # refused: does not fit
    genslm = {**train, "model": TINY.with_changes(vocab_size=69), "steps": 2}
    run_longest_seq_sweep(TrainSpec(benchmark="genslm", tokenizer="codon", seq_lens=(64,),
                                    micro_batches=(1,), **genslm), Recorder(store, env))
    ok = [o for o in cells if o.status == "ok" and o.spec["gas"] == 1]
    _scale_records(ok[:2], Recorder(store, env))


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    """Two databases: A measured here, B the same records with machine B's environment and
    torch version (a difference the fairness section must list)."""
    folder = tmp_path_factory.mktemp("report")
    a, b = ResultStore(folder / "a.db"), ResultStore(folder / "b.db")
    _measure(a)
    records = a.query()
    env_b = {**records[0].environment, **GPU_ENV, "torch": f"{B_TORCH}+cu128"}
    copy = Recorder(b, env_b)
    for r in records:
        copy(Outcome(r.kind, r.status, r.spec, r.metrics, r.raw, r.reason))
    a.close()
    b.close()
    return folder / "a.db", folder / "b.db"


@pytest.fixture(scope="module")
def one(dbs, tmp_path_factory):
    """The report of database A alone, written."""
    out = tmp_path_factory.mktemp("one")
    return make_report([dbs[0]], out), out


@pytest.fixture(scope="module")
def two(dbs, tmp_path_factory):
    """The report of both databases, machine B as the baseline, written."""
    out = tmp_path_factory.mktemp("two")
    return make_report(list(dbs), out, baseline="2"), out


def _images(page: str) -> list[str]:
    return re.findall(r"<img [^>]*src=\"([^\"]*)\"", page)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_machines_are_told_apart_and_named():
    cpu = {"device_type": "cpu", "device_name": "AMD EPYC", "device_count": 1, "cpu": "AMD EPYC",
           "cpu_count": 2, "torch": "2.13.0+cpu", "host": "vm"}
    gpu = {**cpu, **GPU_ENV}
    assert machine_name(cpu) == "AMD EPYC (2 cores) cpu, torch 2.13.0"
    assert machine_name(gpu) == "NVIDIA H100 80GB HBM3 x1, torch 2.11.0"
    assert fingerprint(cpu) != fingerprint(gpu)
    assert fingerprint(cpu) == fingerprint({**cpu, "git_revision": "x", "os": "y"})
    rec = [("a.db", Record("block", "ok", {}, env)) for env in (cpu, gpu, {**cpu, "host": "n2"})]
    machines = group_machines(rec)
    assert [m.name for m in machines] == [
        "AMD EPYC (2 cores) cpu, torch 2.13.0, host vm", "NVIDIA H100 80GB HBM3 x1, torch 2.11.0",
        "AMD EPYC (2 cores) cpu, torch 2.13.0, host n2"]
    assert pick_baseline(machines, None) is machines[0]
    assert pick_baseline(machines, "2") is machines[1] and pick_baseline(machines, "M3") is \
        machines[2]
    assert pick_baseline(machines, "H100") is machines[1]
    with pytest.raises(ConfigError, match="baseline: 'EPYC' matches several machines"):
        pick_baseline(machines, "EPYC")
    with pytest.raises(ConfigError, match="baseline: '9' matches no machine"):
        pick_baseline(machines, "9")


def test_report_has_every_figure_and_table_and_no_broken_image(one):
    written, out = one
    page = written.html.read_text()
    for title in SECTIONS:
        assert f"<h2>{title}</h2>" in page.replace("&#x27;", "'")
    assert [p.stem for p in written.pngs] == list(FIGURES)
    sources = _images(page)
    assert len(sources) == len(FIGURES)
    for src, png in zip(sources, written.pngs, strict=True):
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data == png.read_bytes() and min(_png_size(data)) > 100
    from matplotlib.image import imread

    for png, svg in zip(written.pngs, written.svgs, strict=True):
        assert imread(png).shape[0] > 100  # opens as an image
        assert ET.parse(svg).getroot().tag.endswith("svg")
    # nothing outside the page is loaded
    assert not re.search(r"(src|href)=\"(https?:)?//", page) and "<link" not in page
    assert page.count("does not fit") >= 3  # block, table III, figure captions
    assert "no datasheet: no prediction" in page  # a CPU: no planner prediction
    assert "No sparsity records" in page and "published: CS-2 GPT-2 XL" not in page
    assert "Published GAS speedups" in page and "Published scaling efficiencies" in page
    assert "Longest sequence that fits" in page and "codons/s per device" in page
    assert "Time to train 1e+09 tokens" in page


def test_markdown_links_existing_files(one):
    written, out = one
    text = written.markdown.read_text()
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert len([p for p in links if p.endswith(".png")]) == len(FIGURES)
    for link in links:
        assert not link.startswith(("http", "/")) and (out / link).is_file(), link
    for title in SECTIONS:
        assert f"## {title}" in text


def _here(db: Path) -> dict:
    """The environment database A's records were measured in (this machine's CPU, core count
    and torch: the names a report gives it are derived from it, never written out)."""
    store = ResultStore(db, write=False)
    try:
        return store.query()[0].environment
    finally:
        store.close()


def test_two_databases_are_two_machines_compared(dbs, two):
    written, _ = two
    page = written.html.read_text().replace("&#x27;", "'")
    # each machine named once, in the Machines table: the key of every M1, M2 after it
    assert f"<td>M1</td><td>{machine_name(_here(dbs[0]))}</td>" in page
    assert f"<td>M2 (baseline)</td><td>{B_NAME}</td>" in page
    assert page.count(B_NAME) == 1
    assert "Speedup over M2" in page
    # machine B has a datasheet: the planner's prediction beside the measurement, with its 80%
    # interval (labelled an estimate) and its error
    assert re.search(r"<td>[\d,.]+ \([\d,.]+-[\d,.]+\) [+-]\d+%(, outside)?</td>", page)
    assert "80% interval, est." in page and "80% prediction interval" in page


def test_fairness_lists_what_differs(dbs):
    report = build_report(list(dbs))
    fairness = next(s for s in report.sections if s.key == "fairness")
    (table,) = fairness.tables
    here = _here(dbs[0])
    assert table.header[2:] == ("M1", "M2")
    torch_rows = [row for row in table.rows if row[1] == "torch"]
    assert torch_rows and all(row[2:] == (short_version(here["torch"]), B_TORCH)
                              for row in torch_rows)
    compared = {row[0] for row in torch_rows}
    for prefix in ("block gpt2-tiny ", "train gpt2-tiny ", "genslm gpt2-tiny "):
        assert any(name.startswith(prefix) for name in compared), (prefix, compared)
    assert all(re.search(r" \d[\d.]*M seq \d+ batch \d+", name) for name in compared)
    compare = next(s for s in report.sections if s.key == "compare")
    speedups = compare.tables[2]
    assert {row[2] for row in speedups.rows} == {m for m in table.header[2:]}


def test_sparsity_records_are_drawn_apart_from_the_published(dbs):
    store = ResultStore(dbs[0])
    cells = [r for r in store.query(kind="train") if r.spec.get("gas") == 2
             and r.spec.get("benchmark") == "train" and "scale_devices" not in r.spec]
    store.close()
    sparse = [replace(r, spec={**r.spec, "sparsity": level, "micro_batch": 1})
              for r, level in zip(cells[:2], (0.0, 0.9), strict=True)]
    section = sparsity_section(group_machines([("a.db", r) for r in sparse]))
    (figure,) = section.figures
    ours, published = figure.panels[0], figure.panels[1]
    assert [s.kind for s in ours.series] == ["measured"]  # the paper's CS-2 ran sparse kernels
    assert {s.kind for s in published.series} == {"published"}
    assert "masked dense: 1x expected" in ours.title  # no sparse kernel ran on this CPU
    assert ours.series[0].x == (0.0, 0.9) and ours.series[0].y[0] == pytest.approx(1.0)
    assert not section.paragraphs  # records exist: no "no sparsity records"
    (cells,) = [t for t in section.tables if t.title == "Sparsity cells"]
    sparse_row = next(row for row in cells.rows if row[4] == "0.9")
    # a ratio without enough trials claims nothing: it says so beside the number
    assert "too few samples (n=3, 3)" in sparse_row[7] or "one trial" in sparse_row[7]
    assert sparse_row[9].startswith("masked dense: no sparse kernel ran: no speedup expected")


def test_missing_matplotlib_is_one_line(monkeypatch):
    figure = sparsity_section([]).figures[0]
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConfigError) as err:
        render(figure)
    assert str(err.value) == ("report: needs matplotlib (a dependency of accelbench): "
                              "pip install 'matplotlib>=3.7'")


def test_cli_writes_the_report_and_bad_input_is_exit_2(dbs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "r"
    monkeypatch.setattr(sys, "argv", ["accelbench", "report", "--db", str(dbs[0]), "--db",
                                      str(dbs[1]), "--baseline", "H100", "--out", str(out)])
    with pytest.raises(SystemExit) as code:
        main()
    captured = capsys.readouterr()
    assert code.value.code == 0
    assert captured.out.splitlines()[:2] == [str(out / "report.html"), str(out / "report.md")]
    assert "no network needed" in captured.err
    for args, line in ((["--db", str(tmp_path / "none.db")], "error: db: no results database"),
                       (["--db", str(dbs[0]), "--tokens", "0"], "error: tokens: must be a "
                        "positive number"),
                       (["--db", str(dbs[0]), "--baseline", "7"], "error: baseline: '7' "
                        "matches no machine")):
        monkeypatch.setattr(sys, "argv", ["accelbench", "report", *args, "--out", str(out)])
        with pytest.raises(SystemExit) as code:
            main()
        assert code.value.code == 2 and capsys.readouterr().err.startswith(line)


CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                  "--virtual-time-budget=10000")
SHOT = (1280, 2000)


def _chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args,
                           page.as_uri()], capture_output=True, text=True, timeout=120)


def _body(page: Path, profile: Path, *args: str) -> str:
    """The <body> tag after load, where the page's own checks wrote their results."""
    dom = _chromium(page, profile, *args, "--dump-dom").stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body, dom[:500]
    return body.group(0)


def _images_state(page: Path, profile: Path) -> str:
    """What the page's own check set on <body> after load: 'ok N/N' or 'broken n/N'."""
    body = _body(page, profile)
    state = re.search(r'data-images="(\w+)"', body)
    drawn = re.search(r'data-images-drawn="(\d+/\d+)"', body)
    return f"{state.group(1)} {drawn.group(1) if drawn else '?'}"


def _overflow(page: Path, profile: Path, width: int) -> str:
    """What sticks out past the right edge of a window `width` pixels wide ('none')."""
    body = _body(page, profile, f"--window-size={width},900")
    found = re.search(r'data-overflow="([^"]*)"', body)
    assert found, body
    return found.group(1)


CHROMIUM = shutil.which("chromium")


def test_report_loads_in_chromium_with_every_image_drawn(two, tmp_path):
    if CHROMIUM is None:
        reason = "chromium not installed (Debian: apt-get install chromium; .ci/run installs it)"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    written, _ = two
    n = len(FIGURES)
    assert _images_state(written.html, tmp_path / "p1") == f"ok {n}/{n}"
    # the check is not vacuous: a page with one image that is not a PNG reports it broken
    page = written.html.read_text()
    src = _images(page)[0]
    broken = tmp_path / "broken.html"
    not_png = base64.b64encode(b"not a png" * 20).decode()
    broken.write_text(page.replace(src, f"data:image/png;base64,{not_png}"))
    assert _images_state(broken, tmp_path / "p2") == f"broken {n - 1}/{n}"
    shot = tmp_path / "report.png"
    _chromium(written.html, tmp_path / "p3", f"--screenshot={shot}",
              f"--window-size={SHOT[0]},{SHOT[1]}")
    assert _png_size(shot.read_bytes()) == SHOT


def test_nothing_overflows_the_page_width_in_chromium(two, tmp_path):
    if CHROMIUM is None:
        reason = "chromium not installed (Debian: apt-get install chromium; .ci/run installs it)"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    written, _ = two
    for width in (1280, 760):  # a laptop's window, and half of one
        assert _overflow(written.html, tmp_path / f"w{width}", width) == "none"
    # the check is not vacuous: an element wider than the window is named
    wide = tmp_path / "wide.html"
    wide.write_text(written.html.read_text().replace(
        "<h1>", '<div id="too-wide" style="width:3000px">x</div><h1>', 1))
    assert "div#too-wide" in _overflow(wide, tmp_path / "w3", 1280)


def test_a_report_of_one_study_keeps_only_its_records():
    from accelbench.config.errors import ConfigError
    from accelbench.report import only_study
    from accelbench.store.record import Record

    def rec(study):
        spec = {"study": {"name": study, "experiment": "gas", "profile": "quick"}} if study else {}
        return ("a.db", Record(kind="train", status="ok", spec=spec, environment={}))

    loaded = [rec("emani2023"), rec("mine"), rec(None)]
    assert [r.spec["study"]["name"] for _, r in only_study(loaded, "mine")] == ["mine"]
    assert only_study(loaded, None) == loaded
    with pytest.raises(ConfigError, match="study: no records of study 'other'.*emani2023, mine"):
        only_study(loaded, "other")
