"""The training studies: table III (sequence length), figure 6 (gradient accumulation) and
table IV (GenSLM), from kind 'train' records (and 'seq-search' probes for GenSLM's longest
sequence). Throughput is per device with the spread of the timed steps; a cell that does not
fit is shown as such; the planner's prediction where the device has a datasheet."""

from __future__ import annotations

from collections.abc import Callable

from accelbench.report.cells import (
    Rate,
    canonical,
    gib,
    is_training_cell,
    latest,
    layout_text,
    measured_gib,
    pct,
    points_series,
    rss_note,
    status_text,
    train_rate,
    varying_label,
    wide_range,
)
from accelbench.report.content import Figure, Panel, Series
from accelbench.report.machines import Machine
from accelbench.report.precision_label import FP8_CAPTION, has_fp8, precision_text
from accelbench.report.predict import (
    HEADER,
    prediction_text,
    train_prediction,
)
from accelbench.store.record import Record

CELL_FIELDS = ("model_name", "seq_len", "micro_batch", "gas", "dtype", "recompute", "compile",
               "tf32", "max_micro_batch", "data")
CELL_HEADER = ("machine", "model", "precision", "seq", "micro-batch", "GAS", "recompute",
               "layout", "status")


def sparsity_level(record: Record) -> float:
    """The cell's weight sparsity (0: dense, also for records from before the field)."""
    return float(record.setup.sparsity or 0.0)


def cell_key(record: Record) -> tuple:
    """What makes two training records the same cell on one machine: a sparse cell is never
    the dense cell of the same shape (a 2:4 sweep's dense cell is the plain dense cell)."""
    s = record.setup
    return (*(canonical(getattr(s, f)) for f in CELL_FIELDS), canonical(s.layout),
            sparsity_level(record))


def training_cells(machines: list[Machine], benchmark: str) -> list[tuple[Machine, Record]]:
    """The latest record of each cell of this benchmark, per machine, in a stable order."""
    cells = []
    for m in machines:
        chosen = latest((r for r in m.records if is_training_cell(r, benchmark)), cell_key)
        cells += [(m, r) for r in chosen.values()]

    def order(item: tuple[Machine, Record]) -> tuple:
        s = item[1].setup
        return (item[0].index, str(s.model_name), str(s.dtype),
                s.micro_batch or 0, s.gas or 0, str(s.recompute),
                layout_text(item[1]), s.seq_len or 0)

    return sorted(cells, key=order)


def cell_columns(machine: Machine, r: Record) -> tuple[str, ...]:
    """The columns CELL_HEADER names."""
    s = r.setup
    compiled = ", compiled" if s.compile else ""  # else two rows read the same
    return (machine.label, str(s.model_name), precision_text(s, r.typed) + compiled,
            str(s.seq_len),
            str(s.micro_batch), str(s.gas), str(s.recompute),
            layout_text(r) + all_to_all_text(r), status_text(r))


def all_to_all_text(r: Record) -> str:
    """' (all-to-all 12% of step)' for an expert-parallel cell (the busiest rank's share of
    the step in all-to-all, as the record keeps it), else ''."""
    share = r.typed.all_to_all_fraction
    return "" if share is None else f" (all-to-all {pct(share, 0)} of step)"


def measure_columns(r: Record) -> tuple[str, ...]:
    """Throughput (spread), MFU, measured and estimated memory, the planner's prediction."""
    m, ok = r.typed, r.status == "ok"
    tokens = train_rate(r)
    return (tokens.text() if ok and tokens else "-", pct(m.mfu, 2),
            measured_gib(m), gib(m.mem_estimate_bytes_per_rank),
            prediction_text(train_prediction(r)) if ok else "-")


def measure_header(unit: str) -> tuple[str, ...]:
    """The columns measure_columns gives, in this token unit."""
    return (f"{unit}s/s per device", "MFU", "mem GiB", "est. GiB",
            f"planner {unit}s/s per device {HEADER}")


TABLE_CAPTION = ("Planner: the prediction for the same model, layout and batch, and its error.")


def has_datasheet(records: list[Record]) -> bool:
    """Whether a record's device has a datasheet row (so the planner predicts its cells)."""
    return any(r.environment.get("device_spec_key") for r in records)


def cells_method(records: list[Record]) -> str:
    """A training cells table's method: the planner's column (where a device has a datasheet),
    and the notes its cells need (fp8's MFU, a memory measured as RSS)."""
    fp8 = f" {FP8_CAPTION[0].upper()}{FP8_CAPTION[1:]}." if has_fp8(records) else ""
    planner = TABLE_CAPTION if has_datasheet(records) else ""
    return (planner + fp8 + rss_note(records)).strip()


def cp_label(record: Record) -> str:
    """'cp=N': the cell's context-parallel ranks (1 where its layout has none)."""
    return f"cp={(record.setup.layout or {}).get('cp') or 1}"


def best_by(cells: list[tuple[Machine, Record]], x: Callable[[Record], float],
            by_cp: bool = False) -> dict[tuple, dict[float, list[Record]]]:
    """(machine, model, precision[, cp]) -> x -> that x's records (for one series each;
    `by_cp`: each context-parallel degree its own series)."""
    groups: dict[tuple, dict[float, list[Record]]] = {}
    for m, r in cells:
        key = (m.index, m.label, str(r.setup.model_name), str(r.setup.dtype),
               cp_label(r) if by_cp else "")
        groups.setdefault(key, {}).setdefault(x(r), []).append(r)
    return groups


def best_rate(records: list[Record], value: Callable[[Record], Rate | None]
              ) -> tuple[Rate | None, bool]:
    """The best ok record's value at one x, and whether the x only has cells that do not fit."""
    rates = [v for r in records if r.status == "ok" and (v := value(r)) is not None]
    best = max(rates, key=lambda v: v.value) if rates else None
    return best, best is None and any(r.status == "oom" for r in records)


def best_series(cells: list[tuple[Machine, Record]], x: Callable[[Record], float],
                value: Callable[[Record], Rate | None], by_cp: bool = False) -> list[Series]:
    """One series per machine, model and precision (and cp degree with `by_cp`): at each x,
    the best ok cell's value."""
    groups = best_by(cells, x, by_cp)
    labels = varying_label([{"machine": k[1], "model": k[2], "precision": k[3], "cp": k[4]}
                            for k in groups])
    return [points_series(label, [(xv, *best_rate(rs, value)) for xv, rs in by_x.items()])
            for label, by_x in zip(labels, groups.values(), strict=True)]


def mfu_rate(r: Record) -> Rate | None:
    """MFU with the spread of the steps."""
    tokens, mfu = train_rate(r), r.typed.mfu
    return tokens.scaled(mfu / tokens.value) if tokens and mfu is not None else None


def seq_figure(name: str, title: str, cells: list[tuple[Machine, Record]], unit: str,
               caption: str, by_cp: bool = False) -> Figure:
    """Throughput and MFU against sequence length, the best cell at each length (`by_cp`:
    of each context-parallel degree, a series each)."""
    xlog = wide_range(r.setup.seq_len or 0 for _, r in cells)

    def seq(r: Record) -> float:
        return float(r.setup.seq_len)

    panels = (Panel("throughput", "sequence length (tokens)", f"{unit}s/s per device",
                    tuple(best_series(cells, seq, train_rate, by_cp)), xlog),
              Panel("model FLOPs utilisation", "sequence length (tokens)",
                    "MFU (fraction of dense peak)", tuple(best_series(cells, seq, mfu_rate, by_cp)),
                    xlog))
    return Figure(name, title, panels, caption + " x at the axis: does not fit.")

