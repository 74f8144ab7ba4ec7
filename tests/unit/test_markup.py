"""Text from users, files and other processes prints as text, never as rich markup: paths, model
names and error texts holding `[/x]` (rich's MarkupError when read as markup) and `[bold]` (a
style, which would vanish) come out verbatim from every command, table, note and message."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from rich.console import Console

from accelbench.bench.outcome import Outcome
from accelbench.cli import genslm as genslm_cli
from accelbench.cli.main import main
from accelbench.config.records.scale import ScaleRow
from accelbench.report.table import block_table, scale_table, summary_table, train_table
from accelbench.store.record import Record

CLOSE, STYLE = "[/x]", "[bold]"  # rich reads the first as a stray closing tag, the second a style
ERROR = f"rank 1 said {CLOSE} {STYLE}boom"  # an error text as a failed rank might print it


def _run(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["accelbench", *args])
    with pytest.raises(SystemExit) as stop:
        main()
    captured = capsys.readouterr()
    return stop.value.code, captured.out, captured.err


def _markup_dir(tmp_path: Path) -> Path:
    """A folder whose path reads as markup: tmp/[/x]/[bold]d (the '/' makes two levels)."""
    folder = tmp_path / "[" / "x]" / f"{STYLE}d"
    folder.mkdir(parents=True)
    assert CLOSE in str(folder) and STYLE in str(folder)
    return folder


def _squeeze(text: str) -> str:
    """Text without whitespace and table rules: a cell folded over lines reads whole again."""
    return "".join(ch for ch in text if not ch.isspace() and ch not in "│┃")


def _record(kind: str, reason: str, **spec: object) -> Record:
    return Record(kind=kind, status="error", reason=reason, spec=dict(spec), metrics={},
                  environment={}, raw={}, created_utc="2026-01-01T00:00:00", id=1)


def _render(table: object) -> str:
    """A table on a console that reads markup (as the stderr console does)."""
    console = Console(width=400, record=True, markup=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(table)
    return console.export_text()


def test_tables_print_names_and_reasons_verbatim_on_a_markup_console() -> None:
    name = f"{STYLE}model{CLOSE}"
    train = _record("train", ERROR, seq_len=64, micro_batch=1, gas=1, dtype="fp32",
                    recompute=STYLE, model_name=name)
    block = _record("block", ERROR, batch=1, dtype=CLOSE, model_name=name)
    rows = [ScaleRow(devices=2, global_batch=8, status="error", reason=ERROR)]
    for text in (_render(train_table([train], f"{name} train")),
                 _render(block_table([block], f"{name} block")),
                 _render(summary_table([train, block])),
                 _render(scale_table(rows, f"{name} scaling"))):
        assert name in text and _squeeze(ERROR) in _squeeze(text)
    probes = [_record("seq-search", "", micro_batch=1, gas=1, dtype=STYLE, recompute=CLOSE,
                      probe=1, seq_len=64, method=f"estimate {CLOSE}")]
    probes[0].metrics.update(fits=True, mem_estimate_bytes_per_rank=2**30)
    text = _render(genslm_cli._probe_table(probes))
    assert f"estimate {CLOSE}" in text and STYLE in text


def test_train_prints_model_name_paths_and_error_text_verbatim(tmp_path, monkeypatch,
                                                                 capsys, quick_peak) -> None:
    """A cell that fails with markup in its error, a model named like markup (a neox file's
    stem), and --db/--output paths that read as markup: no MarkupError, all printed as given."""
    folder = _markup_dir(tmp_path)
    config = folder / f"{STYLE}tiny.json"
    config.write_text(json.dumps({"hidden_size": 32, "num_attention_heads": 2,
                                  "num_hidden_layers": 1, "intermediate_size": 64,
                                  "vocab_size": 128, "max_position_embeddings": 64}))

    def fail(*args, **kwargs):
        raise RuntimeError(ERROR)

    monkeypatch.setattr("accelbench.bench.train.cell.run_rank_steps", fail)
    db, output = folder / "r.db", folder / "out.json"
    code, out, err = _run(monkeypatch, capsys, "train", "--model", f"neox:{config}",
                          "--seq", "16", "--micro-batch", "1", "--steps", "2",
                          "--warmup-steps", "1", "--dtype", "fp32", "--device", "cpu",
                          "--db", str(db), "--json", "--output", str(output))
    assert code == 0, err
    assert f"{STYLE}tiny train" in err  # the banner names the model as it is
    assert str(db) in err and f"RuntimeError: {ERROR}" in err  # the results path, the failure
    assert f" records to {output}\n" in err
    assert f"{STYLE}tiny train" in out  # the table's title
    assert _squeeze(f"RuntimeError: {ERROR}") in _squeeze(out)  # its note column (folded)
    assert json.loads(output.read_text())[-1]["reason"].endswith(ERROR)


def test_block_prints_a_failed_cell_and_the_results_path_verbatim(tmp_path, monkeypatch,
                                                                    capsys, quick_peak) -> None:
    folder = _markup_dir(tmp_path)

    def fail(*args, **kwargs):
        raise RuntimeError(ERROR)

    monkeypatch.setattr("accelbench.workloads.block.runner.time_block", fail)
    code, out, err = _run(monkeypatch, capsys, "block", "--model", "gpt2-tiny", "--seq", "16",
                          "--batch", "1", "--dtype", "fp32", "--repeats", "1", "--warmup", "0",
                          "--device", "cpu", "--db", str(folder / "b.db"))
    assert code == 0, err
    assert str(folder / "b.db") in err
    assert _squeeze(f"RuntimeError: {ERROR}") in _squeeze(out)


def test_scale_prints_a_failed_rank_verbatim(tmp_path, monkeypatch, capsys) -> None:
    """A launched cell whose rank failed with markup in its text (the launch is stubbed)."""

    def failed_launch(spec, cell, trial=None):
        return Outcome("train", "error", {"seq_len": cell.seq_len, "micro_batch": 1, "gas": 1,
                                          "dtype": "fp32", "recompute": "none"}, reason=ERROR)

    monkeypatch.setattr("accelbench.bench.train.launch.launch_cell", failed_launch)
    monkeypatch.setattr("accelbench.bench.train.launch.with_launch_peaks",
                        lambda spec, sink: spec)
    db = _markup_dir(tmp_path) / "s.db"
    code, out, err = _run(monkeypatch, capsys, "scale", "--model", "gpt2-tiny", "--seq", "16",
                          "--micro-batch", "1", "--steps", "2", "--warmup-steps", "1",
                          "--dtype", "fp32", "--device", "cpu", "--devices", "1,2",
                          "--db", str(db))
    assert code == 0, err
    assert str(db) in err and f"  error: {ERROR}" in err
    assert _squeeze(ERROR) in _squeeze(out)


def test_data_prepare_and_info_print_a_markup_path_verbatim(tmp_path, monkeypatch,
                                                             capsys) -> None:
    folder = _markup_dir(tmp_path)
    source = folder / f"{STYLE}text.txt"
    source.write_text("Some text to tokenize, twice over. " * 4)
    shards = folder / f"{STYLE}shards"
    code, _, err = _run(monkeypatch, capsys, "data", "prepare", "--source", str(source),
                        "--out", str(shards), "--no-progress")
    assert code == 0, err
    assert f"in {shards}" in err
    code, out, err = _run(monkeypatch, capsys, "data", "info", str(shards))
    assert code == 0, err
    assert f"token shards in {shards}" in out.replace("\n", "")  # the title
    assert _squeeze(f"txt:{source}") in _squeeze(out)  # the source row
    assert err.startswith("ok:")


def test_errors_hw_and_sbatch_print_markup_verbatim(tmp_path, monkeypatch, capsys) -> None:
    missing = tmp_path / CLOSE / f"{STYLE}shards"
    code, out, err = _run(monkeypatch, capsys, "train", "--data", str(missing))
    assert code == 2 and out == "" and err == f"error: data: no such folder: {missing} " \
        "(allowed: a folder made by `accelbench data prepare`)\n"
    code, out, err = _run(monkeypatch, capsys, "plan", "--layout", f"dp={CLOSE}")
    assert code == 2 and f"got '{CLOSE}'" in err
    monkeypatch.setattr("accelbench.hardware.detect.device_name",
                        lambda device: f"{STYLE}GPU {CLOSE}")
    code, out, err = _run(monkeypatch, capsys, "hw", "--device", "cpu")
    assert code == 0 and f"detected: {STYLE}GPU {CLOSE} (cpu)" in out
    code, out, err = _run(monkeypatch, capsys, "sbatch", "--nodes", "1", "--", "train",
                          "--data", f"runs/{CLOSE}{STYLE}")
    assert code == 0 and f" train --data 'runs/{CLOSE}{STYLE}' --db " in out  # quoted as text
