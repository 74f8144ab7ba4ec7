"""Table III of the study (sequence length): tokens/s, MFU and memory against sequence
length, from kind 'train' records of the train benchmark; "does not fit" where a cell was
refused or ran out of memory; and where each length first fits: the fewest ranks (devices)
whose cell ran, a context-parallel layout (cp=2, 4) taking a length one device cannot."""

from __future__ import annotations

from accelbench.config.fit import DOES_NOT_FIT
from accelbench.report.cells import SPREAD, layout_text, rss_note, status_text, train_rate
from accelbench.report.content import Section, Table
from accelbench.report.machines import Machine
from accelbench.report.paper import cite
from accelbench.report.training import (
    CELL_HEADER,
    TABLE_CAPTION,
    cell_columns,
    measure_columns,
    measure_header,
    seq_figure,
    sparsity_level,
    training_cells,
)
from accelbench.store.record import Record

SOURCE = ("kind 'train' records (benchmark train, not a scaling study's cells): "
          "tokens_per_s_per_device with intervals (6+ trials) else step_time_s_min/max, mfu, "
          "mem_added_bytes_per_rank_max, "
          f"mem_estimate_bytes_per_rank; the study's table III ({cite('table III')}: GPT-2 XL "
          "from 1K to 8K tokens and beyond, \"does not fit\" where a system could not run it)")


def seq_section(machines: list[Machine]) -> Section:
    """Table III: every dense training cell, and throughput and MFU against sequence length
    (sparse cells are figure 7's: beside dense ones here they would pass for dense)."""
    title = "Sequence length (table III)"
    every = training_cells(machines, "train")
    cells = [(m, r) for m, r in every if sparsity_level(r) == 0]
    sparse = len(every) - len(cells)
    note = ((f"{sparse} sparse cell(s) are in the weight sparsity section, not here.",)
            if sparse else ())
    if not cells:
        return Section("seq", title, SOURCE, ("No dense training records.", *note))
    table = Table("Training cells by sequence length", CELL_HEADER + measure_header("token"),
                  tuple(cell_columns(m, r) + measure_columns(r) for m, r in cells),
                  TABLE_CAPTION + rss_note(r for _, r in cells))
    fits = first_fits_table(cells)
    figure = seq_figure("table3_seq_tokens", "Training throughput against sequence length",
                        cells, "token",
                        "Table III of the study as a figure: at each length the best cell "
                        "(over micro-batch, GAS and recompute) of each machine, precision and "
                        f"context-parallel layout (cp=N: its own series), error bars: {SPREAD}.",
                        by_cp=True)
    return Section("seq", title, SOURCE, note, (figure,), (fits, table))


FITS_HEADER = ("machine", "model", "precision", "seq", "first fits on", "layout",
               "tokens/s per device", "tokens/s global", "at fewer ranks")
FITS_CAPTION = ("Where each length first fits: the fewest ranks (devices; on a CPU a rank) "
                "whose cell ran, the best of its cells there; throughput at the median step, "
                f"(low-high) after it: {SPREAD}. A length no cell ran is '{DOES_NOT_FIT}', with "
                "how that was decided. 'at fewer ranks': what the cells at fewer ranks "
                "recorded (ranks: verdict), every count tried where none ran.")


def ranks(r: Record) -> int:
    """The ranks (devices) a cell ran on: its layout's world."""
    return int(r.spec.get("world_size") or 1)


def first_fits(records: list[Record]) -> tuple[Record | None, list[Record]]:
    """One length's cells: the best ok cell at the fewest ranks that ran one (None: none ran),
    and the cells at fewer ranks (every cell when none ran)."""
    ran = [r for r in records if r.status == "ok"]
    if not ran:
        return None, records
    fewest = min(ranks(r) for r in ran)
    best = max((r for r in ran if ranks(r) == fewest), key=_rate_value)
    return best, [r for r in records if ranks(r) < fewest]


def _rate_value(r: Record) -> float:
    """A cell's tokens/s per device, 0 where it has none (to pick the best)."""
    rate = train_rate(r)
    return rate.value if rate else 0.0


def first_fits_table(cells: list[tuple[Machine, Record]]) -> Table:
    """Per machine, model and precision, each sequence length's first fit (first_fits)."""
    groups: dict[tuple, list[Record]] = {}
    machines: dict[tuple, Machine] = {}
    for m, r in cells:
        key = (m.index, str(r.spec.get("model_name")), str(r.spec.get("dtype")),
               int(r.spec.get("seq_len") or 0))
        groups.setdefault(key, []).append(r)
        machines[key] = m
    rows = [_fits_row(machines[key], key, *first_fits(rs))
            for key, rs in sorted(groups.items(), key=lambda kv: kv[0])]
    return Table("Where each sequence length first fits", FITS_HEADER, tuple(rows),
                 FITS_CAPTION)


def _fits_row(machine: Machine, key: tuple, best: Record | None,
              others: list[Record]) -> tuple[str, ...]:
    """One length's row: its first fit and throughput, or 'does not fit' and why."""
    start = (machine.label, key[1], key[2], str(key[3]))
    before = "; ".join(sorted({f"{ranks(r)}: {status_text(r)}" for r in others})) or "-"
    if best is None:
        return (*start, DOES_NOT_FIT, "-", "-", "-", before)
    per_device, global_ = train_rate(best), train_rate(best, per_device=False)
    return (*start, f"{ranks(best)} rank(s)", layout_text(best),
            per_device.text() if per_device else "-", global_.text() if global_ else "-",
            before)

