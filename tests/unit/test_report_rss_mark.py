"""CPU memory measured as RSS (records before 2026-11-27, or a machine without glibc) is marked
wherever a measured figure is shown, so it is never read beside malloc's bytes in use as the
same measure."""

from __future__ import annotations

from rich.console import Console

from accelbench.config.records.fields import RSS_METHOD
from accelbench.report.cells import RSS_MARK, RSS_NOTE, measured_gib, rss_note
from accelbench.report.table import train_table
from accelbench.store.record import Record

HEAP = "sampled heap in use (glibc mallinfo2)"
SPEC = {"seq_len": 16, "micro_batch": 1, "gas": 1, "dtype": "fp32"}


def _cell(method: str, added: int) -> Record:
    return Record("train", "ok", SPEC, {}, {"tokens_per_s_global": 900.0,
                                            "mem_added_bytes_per_rank_max": added,
                                            "mem_method": method})


def test_an_rss_figure_is_marked_and_explained_and_a_heap_figure_is_not():
    rss, heap = _cell(RSS_METHOD, 3 * 2**29), _cell(HEAP, 2**29)
    assert measured_gib(rss.typed) == "1.50" + RSS_MARK
    assert measured_gib(heap.typed) == "0.50"
    assert rss_note([heap]) == "" and RSS_NOTE in rss_note([heap, rss])


def test_the_cli_table_marks_the_rss_cell(monkeypatch):
    monkeypatch.setenv("COLUMNS", "220")
    console = Console(width=220, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(train_table([_cell(RSS_METHOD, 3 * 2**29), _cell(HEAP, 2**29)]))
    text = console.export_text()
    assert "1.50 (RSS)" in text and "0.50 (RSS)" not in text and " 0.50 " in text
