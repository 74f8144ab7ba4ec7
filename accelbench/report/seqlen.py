"""Table III of the study (sequence length): tokens/s, MFU and memory against sequence
length, from kind 'train' records of the train benchmark; "does not fit" where a cell was
refused or ran out of memory."""

from __future__ import annotations

from accelbench.report.cells import SPREAD
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
                  TABLE_CAPTION)
    figure = seq_figure("table3_seq_tokens", "Training throughput against sequence length",
                        cells, "token",
                        "Table III of the study as a figure: at each length the best cell "
                        "(over micro-batch, GAS and recompute) of each machine and precision, "
                        f"error bars: {SPREAD}.")
    return Section("seq", title, SOURCE, note, (figure,), (table,))
