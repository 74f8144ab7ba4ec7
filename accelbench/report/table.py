"""Terminal tables of records (rich). Every title, cell and caption is plain text (rich.text.Text):
a model name, a path or a failed rank's error text such as `runs/[/x]` prints as it is, on any
console, never read as markup."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from accelbench.config.fit import fit_text
from accelbench.config.record_kinds import METRICS_BY_KIND
from accelbench.config.records.block import BlockReading
from accelbench.config.records.fields import EnergyFields, RecordSpec, ShownFigure
from accelbench.config.records.peak import PeakMetrics
from accelbench.config.records.profile import ProfileMetrics
from accelbench.config.records.scale import ScaleRow
from accelbench.config.records.train import TrainMetrics
from accelbench.config.vocab import GIB
from accelbench.report.cells import is_training, measured_gib
from accelbench.report.precision_label import FP8_CAPTION, has_fp8, precision_text
from accelbench.report.table_width import KEY, FitTable
from accelbench.report.trial_display import (
    SCALE_EVIDENCE,
    claim_text,
    pct_interval,
    scale_speedup_text,
    status_text,
    trials_caption,
    with_interval,
)
from accelbench.store.record import Record


def plain_table(title: str, **options: Any) -> FitTable:
    """A table that fits its width (report/table_width.py) and whose title is plain text."""
    return FitTable(title=Text(title), **options)


def add_columns(table: FitTable, columns: dict[str, int],
                left: tuple[str, ...] = ("note",)) -> None:
    """Columns by header with their priority (fit.KEY: always shown; 1, 2, ...: left out when
    narrow, the largest first); right-justified and whole (never broken) but those in `left`."""
    for header, priority in columns.items():
        table.add_column(header, justify="left" if header in left else "right",
                         overflow="fold", priority=priority)


def add_plain_row(table: Table, *cells: object) -> None:
    """A row of plain-text cells (None as empty)."""
    table.add_row(*(Text("" if cell is None else str(cell)) for cell in cells))


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value / GIB:.2f}"


def _has_energy(records: list[Record]) -> bool:
    """Whether some record measured energy (then the table has a J/token column)."""
    return any(r.typed.energy_per_token_j is not None for r in records)


def _energy_cells(records: list[Record], m: EnergyFields) -> tuple[str, ...]:
    """The J/token cell of a row, when the table has the column."""
    return (_num(m.energy_per_token_j, ".3g"),) if _has_energy(records) else ()


def with_energy(caption: Text | None, records: list[Record]) -> Text | None:
    """The caption, with where the J/token came from or why there is none (docs/energy.md)."""
    sources = sorted({str(r.typed.energy_source) for r in records
                      if r.typed.energy_per_token_j is not None})
    notes = [str(n) for r in records if (n := r.typed.energy_note)]
    line = (f"J/token over the timed steps, from {', '.join(sources)}" if sources
            else f"energy {notes[0]}" if notes else "")
    if not line:
        return caption
    return Text(f"{caption.plain}; {line}") if caption is not None else Text(line)


def block_table(records: list[Record], title: str = "Transformer block") -> Table:
    """The micro-benchmark grid: one row per batch x dtype, forward and backward apart."""
    table = plain_table(title)
    add_columns(table, {"batch": KEY, "dtype": KEY, "status": KEY, "fwd ms": 3, "bwd ms": 3,
                        "fwd TFLOPS": 2, "bwd TFLOPS": 2, "tokens/s (f+b)": KEY,
                        "MFU (f+b)": KEY, "mem GiB": 4, "est. GiB": 5,
                        **({"J/token": 4} if _has_energy(records) else {}), "note": 1})
    for r in records:
        m = r.typed
        status = status_text(fit_text(r.status, r.reason), m.disturbed)
        fwd, bwd = m.forward.time_s_median, m.backward.time_s_median
        add_plain_row(
            table,
            str(r.setup.batch), r.setup.dtype or "", status,
            _num(fwd and fwd * 1e3, ".2f"), _num(bwd and bwd * 1e3, ".2f"),
            _num(m.forward.tflops_per_device, ".2f"),
            _num(m.backward.tflops_per_device, ".2f"),
            with_interval(m.forward_backward.tokens_per_s_per_device,
                          m.interval(ShownFigure.BLOCK_TOKENS_PER_S), ",.0f"),
            _pct(m.forward_backward.mfu), measured_gib(m),
            _gib(m.mem_estimate_bytes_per_rank), *_energy_cells(records, m), r.reason,
        )
    peaks = peak_captions(records)
    if peaks:
        table.caption = Text(f"MFU against: {peaks}; mem = measured peak above the cell's start, "
                         "est. = analytics estimate")
    table.caption = with_trials(with_energy(table.caption, records), records)
    return table


def with_trials(caption: Text | None, records: list[Record]) -> Text | None:
    """The caption, with what the rows' trials, intervals and disturbance marks mean."""
    line = trials_caption(records)
    if not line:
        return caption
    return Text(f"{caption.plain}; {line}") if caption is not None else Text(line)


def peak_captions(records: list[Record]) -> str:
    """Each precision's peak once, with where it came from (dtypes of a sweep have their own)."""
    seen: dict[str, str] = {}
    for r in records:
        m = r.typed
        if m.peak_label and m.peak_precision not in seen:
            value = m.peak_flops_per_s_per_device
            tflops = "" if value is None else f" {value / 1e12:.3g} TFLOPS"
            seen[m.peak_precision] = f"{m.peak_precision}{tflops}, {m.peak_label}"
    return "; ".join(seen.values())


def summary_table(records: list[Record]) -> Table:
    """A short listing of stored records."""
    table = plain_table("Results")
    for column, priority in (("id", KEY), ("created (UTC)", 2), ("kind", KEY), ("model", 1),
                             ("status", KEY), ("key figure", KEY)):
        table.add_column(column, priority=priority, whole=column in ("id", "status"))
    for r in records:
        add_plain_row(table, r.id, r.created_utc[:19], r.kind, r.setup.model_name or "",
                      r.status, key_figure(r))
    return table


def _profile_figure(m: ProfileMetrics) -> str:
    """A machine profile: its points, fastest GEMM and best bus bandwidth."""
    gemm = max((m.gemm_flops_per_s_max_by_dtype or {}).values(), default=None)
    bus = max((m.collective_bus_bytes_per_s_max_by_op or {}).values(), default=None)
    text = f"profile: {len(m.points)} points"
    text += f", GEMM {gemm / 1e12:.3g} TFLOPS" if gemm else ""
    return text + (f", busbw {bus / 1e9:.3g} GB/s" if bus else "")


def key_figure(r: Record) -> str:
    """The one number that best sums a record up."""
    if r.kind not in METRICS_BY_KIND:  # another tool's kind: its reason only
        return r.reason[:60]
    m = r.typed
    if isinstance(m, PeakMetrics) and m.peak_flops_per_s_per_device is not None:
        return f"peak {m.peak_flops_per_s_per_device / 1e12:.3g} TFLOPS"
    if isinstance(m, ProfileMetrics) and m.points:
        return _profile_figure(m)
    rate = (m.forward_backward.tokens_per_s_per_device, m.forward_backward.mfu) \
        if isinstance(m, BlockReading) else (m.tokens_per_s_global, m.mfu) if is_training(r) \
        else None
    if rate is not None and rate[0] is not None:
        tokens, mfu = rate
        return f"{tokens:,.0f} tok/s" + (f", MFU {_pct(mfu)}" if mfu is not None else "")
    return r.reason[:60]


def token_unit(records: list[Record]) -> str:
    """What the records' tokens are ('codon' for GenSLM), from the records themselves; 'token'
    when they disagree or do not say."""
    units = {r.setup.token_unit or "token" for r in records}
    return units.pop() if len(units) == 1 else "token"


def _sparse_cells(spec: RecordSpec, m: TrainMetrics) -> tuple[tuple[str], tuple[str, str]]:
    """A sparsity sweep's cells: the level asked (measured), the speedup over the sweep's dense
    cell and the loss at the end against it (absolute and relative)."""
    asked, measured = spec.sparsity or 0, m.sparsity_measured
    level = f"{asked:g}" + (f" ({measured:.3f})" if measured is not None else "")
    speedup = m.speedup_vs_dense
    delta, rel = m.loss_last_vs_dense, m.loss_last_vs_dense_relative
    loss = f"{delta:+.3f} ({rel:+.1%})" if delta is not None and rel is not None else "-"
    return (level,), (claim_text(speedup, m.speedup_vs_dense_low, m.speedup_vs_dense_high,
                                 m.speedup_vs_dense_verdict), loss)


def train_table(records: list[Record], title: str = "Training") -> Table:
    """One row per training cell: throughput, utilisation, memory, loss."""
    table = plain_table(title)
    rate = f"{token_unit(records)}s/s"
    sparse = any(r.setup.sparsity for r in records)  # a sparsity sweep: its columns
    level = {"sparsity": KEY} if sparse else {}
    vs_dense = {"speedup vs dense": KEY, "loss vs dense": 2} if sparse else {}
    add_columns(table, {"seq": KEY, "mb": KEY, "gas": KEY, "dtype": KEY, "recompute": 2,
                        **level, "status": KEY, "step ms": 3, rate: KEY, "TFLOPS": 3,
                        "MFU": KEY, "HFU": 5, "mem GiB": 4, "est. GiB": 6,
                        "loss first>last": 4, **vs_dense, "data wait": 6,
                        **({"J/token": 4} if _has_energy(records) else {}), "note": 1})
    for r in records:
        m, s = r.typed, r.setup
        t = m.step_time_s_median
        first, last = m.loss_first, m.loss_last
        loss = f"{first:.3f}>{last:.3f}" if first is not None and last is not None else "-"
        level, vs_dense = _sparse_cells(s, m) if sparse else ((), ())
        add_plain_row(
            table,
            str(s.seq_len), str(s.micro_batch), str(s.gas),
            precision_text(s, m), s.recompute or "", *level,
            status_text(fit_text(r.status, r.reason), m.disturbed),
            _num(t and t * 1e3, ".1f"),
            with_interval(m.tokens_per_s_global, m.interval(ShownFigure.TOKENS_PER_S_GLOBAL),
                          ",.0f"),
            _num(m.tflops_per_device, ".2f"),
            _pct(m.mfu), _pct(m.hfu), measured_gib(m),
            _gib(m.mem_estimate_bytes_per_rank), loss, *vs_dense,
            _pct(m.data_wait_fraction), *_energy_cells(records, m), r.reason)
    peaks = peak_captions(records)
    if peaks:
        table.caption = Text(f"MFU/HFU against: {peaks}; {rate} global over the median step; "
                         "mem = measured peak above the cell's start (the rank that added the "
                         "most), est. = analytics estimate of one rank"
                         + (f"; {FP8_CAPTION}" if has_fp8(records) else ""))
    table.caption = with_trials(with_energy(table.caption, records), records)
    return table


def scale_table(rows: list[ScaleRow], title: str = "Scaling") -> Table:
    """The study's table II: throughput, speedup and scaling efficiency per device count."""
    table = plain_table(title)
    add_columns(table, {"devices": KEY, "global batch": 2, "status": KEY, "tokens/s": KEY,
                        "tokens/s/device": 2, "speedup": KEY, "scaling eff.": KEY, "MFU": 2,
                        "note": 1})
    for r in rows:
        add_plain_row(table, r.devices, r.global_batch, r.status,
                      _num(r.tokens_per_s_global, ",.0f"), _num(r.tokens_per_s_per_device, ",.0f"),
                      scale_speedup_text(r), pct_interval(r.scaling_efficiency,
                                                          r.scaling_efficiency_low,
                                                          r.scaling_efficiency_high),
                      _pct(r.mfu), r.reason or "")
    trials = sorted({r.trials for r in rows if r.trials})
    shown = "/".join(map(str, trials)) if trials else "1"
    table.caption = Text(f"{shown} trial(s) a count; {SCALE_EVIDENCE}")
    return table
