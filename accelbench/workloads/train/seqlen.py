"""Table III of the study (sequence length): tokens/s, MFU and memory against sequence
length, from kind 'train' records of the train benchmark; "does not fit" where a cell was
refused or ran out of memory; and where each length first fits: the fewest ranks (devices)
whose cell ran, a context-parallel layout (cp=2, 4) taking a length one device cannot."""

from __future__ import annotations

from accelbench.config.fit import DOES_NOT_FIT
from accelbench.report.cells import short_layout, status_text, train_rate
from accelbench.report.content import Finding, Section, Table
from accelbench.report.findings import prefixed
from accelbench.report.machines import Machine
from accelbench.report.paper import cite
from accelbench.report.training import (
    CELL_HEADER,
    cell_columns,
    cells_method,
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
    """Table III: where each length first fits, every dense training cell (folded), and
    throughput and MFU against sequence length (sparse cells are figure 7's: beside dense ones
    here they would pass for dense)."""
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
                  "Every dense training cell, GAS and sparsity sweeps' included.",
                  cells_method([r for _, r in cells]), ())
    fits, found = first_fits_table(cells)
    figure = seq_figure("table3_seq_tokens", "Training throughput against sequence length",
                        cells, "token",
                        "The study's table III as a figure: at each length the best cell of "
                        "each machine, precision and context-parallel layout (cp=N its own "
                        "series).", by_cp=True)
    return Section("seq", title, SOURCE, note, (figure,), (fits, table), found)


FITS_HEADER = ("machine", "model", "precision", "seq", "first fits on", "layout",
               "tokens/s per device", "tokens/s global", "at fewer ranks")
FITS_CAPTION = ("Each length's fewest ranks (devices; on a CPU a rank) whose cell ran, and its "
                "best cell there; a length no cell ran does not fit.")
FITS_METHOD = ("'at fewer ranks': what the cells at fewer ranks recorded (ranks: verdict), "
               "every count tried where none ran; 'does not fit' says how that was decided.")


def ranks(r: Record) -> int:
    """The ranks (devices) a cell ran on: its layout's world."""
    return int(r.setup.world_size or 1)


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


def first_fits_table(cells: list[tuple[Machine, Record]]) -> tuple[Table, tuple[Finding, ...]]:
    """Per machine, model and precision, each sequence length's first fit (first_fits), and
    a finding per machine, model and precision."""
    groups: dict[tuple, list[Record]] = {}
    machines: dict[tuple, Machine] = {}
    for m, r in cells:
        key = (m.index, str(r.setup.model_name), str(r.setup.dtype),
               int(r.setup.seq_len or 0))
        groups.setdefault(key, []).append(r)
        machines[key] = m
    ordered = sorted(groups.items(), key=lambda kv: kv[0])
    rows = [_fits_row(machines[key], key, *first_fits(rs)) for key, rs in ordered]
    series: dict[tuple, list[str]] = {}
    swept = {k[:3] for k, rs in ordered if any(r.status != "ok" for r in rs)}
    swept |= {k for k in {k[:3] for k, _ in ordered}
              if len({key[3] for key, _ in ordered if key[:3] == k}) > 1}
    for key, records in ordered:  # a finding where lengths were swept or one did not fit
        if key[:3] in swept:
            series.setdefault(key[:3], []).append(_fits_phrase(key[3], *first_fits(records)))
    many = len({k[0] for k in series}) > 1
    found = tuple(Finding(prefixed(f"M{k[0]}", f"Sequence length ({k[1]}, {k[2]}): "
                                   + _joined(phrases), many), "seq")
                  for k, phrases in series.items())
    return Table("Where each sequence length first fits", FITS_HEADER, tuple(rows),
                 FITS_CAPTION, FITS_METHOD), found


def _fits_phrase(seq: int, best: Record | None, others: list[Record]) -> str:
    """'512 does not fit 1 rank (estimated); runs on cp=2, 802 tokens/s a device (784-824)'."""
    missed = sorted({(ranks(r), status_text(r)) for r in others})
    before = "; ".join(f"does not fit {n} rank(s) ({text.removeprefix(DOES_NOT_FIT).strip(' ()')})"
                       if text.startswith(DOES_NOT_FIT) else f"{n} rank(s): {text}"
                       for n, text in missed)
    if best is None:
        return f"{seq}: {before or DOES_NOT_FIT}"
    rate = train_rate(best)
    where = (f"runs on {short_layout(best) or f'{ranks(best)} ranks'}" if ranks(best) > 1
             else "runs on 1 rank")
    shown = f", {rate.text()} tokens/s a device" if rate and (before or ranks(best) > 1) else ""
    return f"{seq}: {before + '; ' if before else ''}{where}{shown}"


def _joined(phrases: list[str]) -> str:
    """Consecutive lengths that plainly run on one rank said once: '128, 256: run on 1 rank'."""
    plain = [p.split(":")[0] for p in phrases if p.endswith(": runs on 1 rank")]
    rest = [p for p in phrases if not p.endswith(": runs on 1 rank")]
    head = [f"{', '.join(plain)}: run{'s' if len(plain) == 1 else ''} on 1 rank"] if plain else []
    return "; ".join(head + rest)


def _fits_row(machine: Machine, key: tuple, best: Record | None,
              others: list[Record]) -> tuple[str, ...]:
    """One length's row: its first fit and throughput, or 'does not fit' and why."""
    start = (machine.label, key[1], key[2], str(key[3]))
    before = "; ".join(sorted({f"{ranks(r)}: {status_text(r)}" for r in others})) or "-"
    if best is None:
        return (*start, DOES_NOT_FIT, "-", "-", "-", before)
    per_device, global_ = train_rate(best), train_rate(best, per_device=False)
    return (*start, f"{ranks(best)} rank(s)", short_layout(best) or "-",
            per_device.text() if per_device else "-", global_.text() if global_ else "-",
            before)

