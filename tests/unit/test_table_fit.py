"""Tables that fit the width (report/table_width.py): at 80 and 120 columns no line is wider and
every number shown is whole, the columns left out are named, --wide shows them; off a terminal the
progress is a line per finished cell on stderr (report/cell_lines.py)."""

from __future__ import annotations

import io
import re

import pytest
from cli_run import run_main as _run_main

from accelbench.report.cell_lines import CellLines, StudyLines, duration
from accelbench.report.table import block_table, train_table
from accelbench.report.table_width import PIPE_WIDTH, FitConsole, output_width
from accelbench.store.record import Record

SPEC = {"seq_len": 1024, "micro_batch": 8, "gas": 4, "dtype": "bf16", "recompute": "selective"}
METRICS = {"step_time_s_median": 1.23456, "tokens_per_s_global": 123456.7,
           "tflops_per_device": 312.55, "mfu": 0.4567, "hfu": 0.5123,
           "mem_added_bytes_per_rank_max": 34.5e9, "mem_estimate_bytes_per_rank": 35.1e9,
           "loss_first": 10.987, "loss_last": 7.654, "data_wait_fraction": 0.012}
# each column's value in the rows that ran, as the table writes it
SHOWN = {"seq": "65536", "step ms": "1234.6", "tokens/s": "123,457", "TFLOPS": "312.55",
         "MFU": "45.7%", "HFU": "51.2%", "mem GiB": "32.13", "est. GiB": "32.69",
         "loss first>last": "10.987>7.654", "data wait": "1.2%"}
OOM = "CUDA out of memory: tried to allocate 12.00 GiB (GPU 0; 79.11 GiB total capacity)"


def _records() -> list[Record]:
    cells = [Record("train", "ok", {**SPEC, "seq_len": seq}, {}, METRICS)
             for seq in (1024, 65536)]
    return cells + [Record("train", "oom", {**SPEC, "seq_len": 131072}, {}, {}, reason=OOM)]


def _render(table, width: int, monkeypatch, wide: bool = False) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    buffer = io.StringIO()
    FitConsole(file=buffer, markup=False, wide=wide).print(table)
    return buffer.getvalue()


def _rows(text: str) -> list[list[str]]:
    """The cells of each table line (header lines included), stripped."""
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines()
            if line.startswith("│")]


@pytest.mark.parametrize("width", [80, 120])
def test_at_80_and_120_columns_numbers_stay_whole_and_the_left_out_are_named(monkeypatch,
                                                                             width):
    text = _render(train_table(_records(), "gpt2-xl train"), width, monkeypatch)
    assert max(len(line) for line in text.splitlines()) <= width
    header = text[text.index("┃"):text.index("┡")]
    kept = [name for name in SHOWN if name in header.replace("┃\n┃", " ")
            or all(word in header for word in name.split())]
    assert {"seq", "tokens/s", "MFU"} <= set(kept)  # the key and the main metric stay
    for name in kept:
        # each value whole in one cell of its own line, in each row that ran
        assert sum(SHOWN[name] in row for row in _rows(text)) >= (1 if name == "seq" else 2), name
    assert "does not fit" in text and "131072" in text
    note = re.search(r"left out to fit (\d+) columns: (.*) \(--wide shows them\)",
                     " ".join(text.split()))
    assert note and int(note.group(1)) == width
    left = note.group(2).split(", ")
    assert "HFU" in left and not set(left) & {"seq", "tokens/s", "MFU", "status"}
    assert set(kept) | set(left) >= set(SHOWN)


def test_wide_shows_every_column_past_the_width(monkeypatch):
    text = _render(train_table(_records(), "gpt2-xl train"), 80, monkeypatch, wide=True)
    assert "left out" not in text
    row = next(r for r in _rows(text) if "65536" in r)
    assert all(value in row for value in SHOWN.values())
    assert max(len(line) for line in text.splitlines()) > 80


def test_a_wide_enough_table_is_left_whole_and_empty_columns_go_first(monkeypatch):
    block = [Record("block", "ok", {"batch": b, "dtype": "fp32"}, {}, {
        "forward_time_s_median": 0.0123, "backward_time_s_median": 0.0345,
        "forward_tflops_per_device": 123.4, "backward_tflops_per_device": 234.5,
        "forward_backward_tokens_per_s_per_device": 1234567, "forward_backward_mfu": 0.345})
        for b in (8, 64)]
    assert "left out" not in _render(block_table(block), 200, monkeypatch)
    text = _render(block_table(block), 80, monkeypatch)
    # the empty ones (no memory measured, no note) go before a column with figures
    assert " ".join(text.split()).endswith(
        "left out to fit 80 columns: mem GiB, est. GiB, note (--wide shows them)")
    assert all("1,234,567" in row for row in _rows(text)[-2:])


def test_the_width_is_the_terminal_s_or_columns_or_a_wide_default():
    class Stream(io.StringIO):
        def __init__(self, tty: bool) -> None:
            super().__init__()
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    assert output_width(Stream(True), {"COLUMNS": "90"}) is None  # rich reads the terminal
    assert output_width(Stream(False), {"COLUMNS": "90"}) == 90
    assert output_width(Stream(False), {}) == output_width(Stream(False), {"COLUMNS": "0"})
    assert output_width(Stream(False), {"COLUMNS": "wide"}) == PIPE_WIDTH


def test_a_line_per_finished_cell_and_the_study_eta():
    now = [0.0]
    lines: list[str] = []
    sweep = CellLines("block", lines.append, clock=lambda: now[0])
    sweep.update(0, 2, "batch 1 fp32")
    now[0] = 1.5
    sweep.update(1, 2, "batch 2 fp32")
    now[0] = 4.0
    sweep.update(2, 2, "done")
    sweep.close()  # nothing open: no line
    assert lines == ["[1/2] block batch 1 fp32 ... 1.5 s", "[2/2] block batch 2 fp32 ... 2.5 s"]
    lines.clear()
    study = StudyLines([10.0, 10.0, 20.0, 40.0], lines.append, clock=lambda: now[0])
    study.done(0, True)  # finished before: counted, no line
    study.cell(1, "blk batch 2")
    now[0] += 5.0
    study.done(1, False)  # 5 s for an estimated 10 s: the 60 s left take 30 s
    assert lines == ["[1/3] blk batch 2 ... 5.0 s, ETA 30.0 s"]  # numbered in run order
    assert StudyLines([], lines.append).eta() == 0.0
    assert [duration(s) for s in (0.44, 100, 7500)] == ["0.4 s", "1m40s", "2h05m"]


def test_the_block_command_at_80_columns(monkeypatch, capsys, tmp_path, quick_peak):
    """The table on stdout fits 80 columns with each figure whole, and stderr (not a terminal
    under the test) has a line per finished cell."""
    monkeypatch.setenv("COLUMNS", "80")
    args = ("block", "--model", "gpt2-tiny", "--seq", "16", "--batch", "1,2", "--dtype", "fp32",
            "--repeats", "2", "--warmup", "0", "--trials", "2", "--device", "cpu", "--db",
            str(tmp_path / "b.db"))
    code, out, err = _run_main(monkeypatch, capsys, *args)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    rows = [r for r in _rows(out) if r[0] in ("1", "2")]
    assert len(rows) == 2 and all(re.fullmatch(r"[\d,]+", r[-2] or r[-3]) for r in rows)
    assert "left out to fit 80 columns" in " ".join(out.split())
    lines = re.findall(r"^\[(\d)/4\] block batch [12] fp32, trial ([12])/2 \.\.\. [\d.]+ s$",
                       err, re.M)  # a line per trial, the cells interleaved
    assert [n for n, _ in lines] == ["1", "2", "3", "4"]
    assert sorted(t for _, t in lines) == ["1", "1", "2", "2"]
    code, wide, _ = _run_main(monkeypatch, capsys, *args, "--wide")  # shown from the store
    assert code == 0 and "left out" not in wide and "est. GiB" in wide


def test_the_planner_at_80_columns_and_wide(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    args = ("plan", "--model", "gpt3-175b", "--device", "a100-80gb", "--nodes", "8", "--top",
            "3")
    code, out, _ = _run_main(monkeypatch, capsys, *args)
    assert code == 0
    table = out[:out.index("└")]
    assert max(len(line) for line in table.splitlines()) <= 80
    header = next([c.strip() for c in line.split("┃")[1:-1]] for line in table.splitlines()
                  if "tok/s" in line)
    rate = header.index("tok/s")
    whole = r"[\d.,]+[kM]? \([\d.,]+[kM]?-[\d.,]+[kM]?\)"  # a rate and its 80% interval
    assert all(re.fullmatch(whole, row[rate]) for row in _rows(table)[-3:])  # on one line
    assert "(--wide shows them)" in out and "HFU" not in table
    code, out, _ = _run_main(monkeypatch, capsys, *args, "--wide")
    assert code == 0 and "HFU" in out and "left out" not in out


BLOCK_STUDY = """
title = "tiny"
[profiles.quick]
description = "seconds"
[experiments.blk]
workload = "block"
source = "figures 3-4"
options = { model = "gpt2-tiny", seq = 16, repeats = 2, warmup = 0, trials = 1 }
sweep = { batch = [1, 2], dtype = ["fp32"] }
"""


def test_a_study_off_a_terminal_says_each_cell_with_its_eta(monkeypatch, capsys, tmp_path,
                                                            quick_peak):
    study = tmp_path / "tiny.toml"
    study.write_text(BLOCK_STUDY)
    code, out, err = _run_main(monkeypatch, capsys, "study", "run", str(study), "--profile",
                               "quick", "--device", "cpu", "--db", str(tmp_path / "s.db"))
    assert code == 0, err
    assert re.search(r"^\[1/2\] blk: batch 1 fp32 \.\.\. [\d.]+ s, ETA [\d.]+ s$", err, re.M), err
    assert re.search(r"^\[2/2\] blk: batch 2 fp32 \.\.\. [\d.]+ s, ETA 0.0 s$", err, re.M), err
