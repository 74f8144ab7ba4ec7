"""Figures 3 and 4 of the study (the transformer-block micro-benchmark): forward and backward
TFLOPS, and forward+backward tokens/s and MFU, against batch, one series per machine and
precision, from kind 'block' records; the planner's assumed compute rate where the device has
a datasheet."""

from __future__ import annotations

from accelbench.config.record_kinds import carries
from accelbench.config.records.block import BlockMetrics
from accelbench.report.cells import (
    Rate,
    gib,
    latest,
    measured_gib,
    pct,
    phase_rate,
    points_series,
    rss_note,
    status_text,
    varying_label,
    wide_range,
)
from accelbench.report.content import PREDICTED, Figure, Finding, Panel, Section, Series, Table
from accelbench.report.machines import Machine
from accelbench.report.paper import cite
from accelbench.report.predict import (
    HEADER,
    Prediction,
    block_prediction,
    prediction_text,
)
from accelbench.report.training import has_datasheet
from accelbench.store.record import Record

SOURCE = ("kind 'block' records: <phase>_tflops_per_device, forward_backward_tokens_per_s_per_"
          "device, forward_backward_mfu, error bars from intervals (6+ trials) else "
          "<phase>_time_s_min/max; the study's "
          f"figures 3 and 4 ({cite('figs. 3-4')}: one GPT-2 XL layer, seq 1024, batch 8-64)")


def _series_key(record: Record) -> tuple:
    s = record.setup
    return (s.model_name, s.seq_len, s.dtype, bool(s.compile),
            bool(s.tf32))


def _groups(machines: list[Machine]) -> dict[tuple, list[Record]]:
    """(machine index, series key) -> the latest record of each batch, batch order."""
    groups: dict[tuple, list[Record]] = {}
    for m in machines:
        blocks = [r for r in m.records if carries(r.kind, BlockMetrics)]
        for record in latest(blocks, lambda r: (_series_key(r), r.setup.batch)).values():
            groups.setdefault((m.index, *_series_key(record)), []).append(record)
    return {k: sorted(v, key=lambda r: r.setup.batch or 0) for k, v in sorted(
        groups.items(), key=lambda kv: tuple(str(p) for p in kv[0]))}


def _labels(groups: dict[tuple, list[Record]], machines: list[Machine]) -> list[str]:
    names = {m.index: m.label for m in machines}
    parts = [{"machine": names[k[0]], "precision": k[3], "model": f"{k[1]} seq {k[2]}",
              "options": " ".join(w for w, on in (("compiled", k[4]), ("tf32", k[5])) if on)}
             for k in groups]
    return varying_label(parts)


def _mfu_rate(record: Record) -> Rate | None:
    """forward+backward MFU with the spread of its time."""
    mfu = record.typed.forward_backward.mfu
    r = phase_rate(record, "forward_backward", "tokens")
    if mfu is None or r is None:
        return None
    return r.scaled(mfu / r.value)


def _series(label: str, records: list[Record], value) -> Series:
    return points_series(label, [(r.setup.batch, value(r) if r.status == "ok" else None,
                                  r.status == "oom") for r in records])


def _planner(label: str, records: list[Record]) -> list[Series]:
    """The planner's assumed TFLOPS for the series' device, flat over its batches, with its
    80% interval (drawn as a band)."""
    ok = [r for r in records if r.status == "ok"]
    pred = block_prediction(ok[0]) if ok else None
    if not isinstance(pred, Prediction):
        return []
    xs = tuple(float(r.setup.batch) for r in records)
    n = len(xs)
    low, high = ((pred.bounds[0],) * n, (pred.bounds[1],) * n) if pred.bounds else (None, None)
    return [Series(f"{label} planner", xs, (pred.value,) * n, low, high, kind=PREDICTED)]


def _figures(groups: dict[tuple, list[Record]], labels: list[str]) -> tuple[Figure, Figure]:
    items = list(zip(labels, groups.values(), strict=True))
    xlog = wide_range(r.setup.batch for _, rs in items for r in rs)

    def tflops(phase: str) -> Panel:
        series = [_series(lab, rs, lambda r, p=phase: _tflops(r, p)) for lab, rs in items]
        planner = [s for lab, rs in items for s in _planner(lab, rs)]
        return Panel(f"{phase} pass", "batch (sequences)", "TFLOPS per device",
                     tuple(series + planner), xlog)

    fig3 = Figure("fig3_block_tflops", "Transformer block: TFLOPS against batch",
                  (tflops("forward"), tflops("backward")),
                  "The study's figure 3: model TFLOPS per device of one transformer layer, "
                  "forward and backward, against batch. Dotted where drawn: the planner's "
                  "assumed rate, shaded its 80% interval.")
    tokens = Panel("forward + backward", "batch (sequences)", "tokens/s per device",
                   tuple(_series(lab, rs, lambda r: phase_rate(r, "forward_backward",
                                                               "tokens"))
                         for lab, rs in items), xlog)
    mfu = Panel("model FLOPs utilisation", "batch (sequences)",
                "MFU (fraction of dense peak)",
                tuple(_series(lab, rs, _mfu_rate) for lab, rs in items), xlog)
    fig4 = Figure("fig4_block_tokens", "Transformer block: tokens/s and MFU against batch",
                  (tokens, mfu),
                  "The study's figure 4: forward+backward tokens/s per device and MFU against "
                  "batch, each machine against its own peak for the precision that ran.")
    return fig3, fig4


def _tflops(record: Record, phase: str) -> Rate | None:
    """A phase's TFLOPS per device with its spread."""
    r = phase_rate(record, phase, "flops")
    return r.scaled(1e-12) if r else None


def _row(label: str, r: Record) -> tuple[str, ...]:
    m = r.typed
    cells = [_tflops(r, p) for p in ("forward", "backward")]
    tokens = phase_rate(r, "forward_backward", "tokens")
    ok = r.status == "ok"
    return (label, str(r.setup.batch), status_text(r),
            *(c.text(".3g") if ok and c else "-" for c in cells),
            tokens.text() if ok and tokens else "-", pct(m.forward_backward.mfu, 2),
            measured_gib(m), gib(m.mem_estimate_bytes_per_rank),
            prediction_text(block_prediction(r), ".3g") if ok else "-")


def _best_rows(groups: dict[tuple, list[Record]]) -> tuple[int, ...]:
    """The index of each series' fastest ok row (forward+backward tokens/s): the headline."""
    shown, start = [], 0
    for records in groups.values():
        rates = [(phase_rate(r, "forward_backward", "tokens"), i)
                 for i, r in enumerate(records) if r.status == "ok"]
        rates = [(rate.value, i) for rate, i in rates if rate]
        if rates:
            shown.append(start + max(rates)[1])
        start += len(records)
    return tuple(shown)


def _finding(groups: dict[tuple, list[Record]], machines: list[Machine]
             ) -> tuple[Finding, ...]:
    """Per machine: its fastest series at its best batch, with interval and MFU, and the other
    precisions' best beside it."""
    lines = []
    for m in machines:
        best = []
        for key, records in groups.items():
            ok = [(rate, r) for r in records if key[0] == m.index and r.status == "ok"
                  and (rate := phase_rate(r, "forward_backward", "tokens"))]
            if ok:
                best.append(max(ok, key=lambda item: item[0].value))
        if not best:
            continue
        best.sort(key=lambda item: -item[0].value)
        (rate, r), others = best[0], best[1:]
        s = r.setup
        rest = ", ".join(f"{o.setup.dtype} {v.value:,.0f}" for v, o in others)
        text = (f"Transformer block ({s.model_name} layer, seq {s.seq_len}): "
                f"fastest {s.dtype} at batch {s.batch}, {rate.text()} tokens/s "
                f"forward+backward, {pct(r.typed.forward_backward.mfu, 1)} MFU"
                + (f"; the best of {rest} tokens/s" if rest else ""))
        lines.append(Finding(f"M{m.index}: {text}" if len(machines) > 1 else text, "block"))
    return tuple(lines)


def block_section(machines: list[Machine]) -> Section:
    """Figures 3-4, the table of every block cell (each series' best row by default), and the
    finding."""
    title = "Transformer block (figures 3-4)"
    groups = _groups(machines)
    if not groups:
        return Section("block", title, SOURCE, ("No block records.",))
    labels = _labels(groups, machines)
    rows = tuple(_row(lab, r) for lab, rs in zip(labels, groups.values(), strict=True)
                 for r in rs)
    every = [r for rs in groups.values() for r in rs]
    table = Table("Block cells", ("series", "batch", "status", "fwd TFLOPS", "bwd TFLOPS",
                                  "tokens/s f+b", "MFU f+b", "mem GiB", "est. GiB",
                                  f"planner TFLOPS f+b {HEADER}"), rows,
                  "Each series' fastest batch; throughput at the median repetition with its "
                  "interval.",
                  ("Planner: its compute efficiency times the datasheet's dense peak (that of "
                   "one compute-limited device)." if has_datasheet(every) else "")
                  + rss_note(every),
                  _best_rows(groups))
    return Section("block", title, SOURCE, (), _figures(groups, labels), (table,),
                   _finding(groups, machines))
