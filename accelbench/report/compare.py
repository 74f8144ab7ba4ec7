"""Comparing machines (point 4 of the study's complaint about fair comparisons): per workload
and precision, each machine's best measured cell; MFU against the machine's own dense peak;
the time (and energy, when records carry it) to train a stated number of tokens; speedups over
a baseline machine; and what differs between the machines' runs of the same experiment."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.analytics.params import total_params
from accelbench.config.errors import ConfigError
from accelbench.config.model import ModelConfig
from accelbench.config.record_kinds import carries
from accelbench.config.records.base import ComparedFigure
from accelbench.config.records.block import BlockReading
from accelbench.config.records.fields import PeakFields
from accelbench.report.cells import (
    Rate,
    compared_figure,
    duration,
    figure_rate,
    is_training,
    num,
    short_layout,
    tflops,
)
from accelbench.report.content import Figure, Panel, Section, Series, Table
from accelbench.report.energy import energy_table, energy_text, unavailable_text
from accelbench.report.evidence import speedup_text
from accelbench.report.machines import Machine
from accelbench.report.noise_floor import noise_sentence
from accelbench.store.fingerprint import global_batch, workload_id
from accelbench.store.record import Record

# What the section reads of block and training cells; another kind's cells are in it where its
# kind declares the figure they are compared on (RecordKind.compared: its rate, mfu and tflops).
SOURCE = ("every ok 'block' and 'train' record: forward_backward_tokens_per_s_per_device or "
          "tokens_per_s_global and _per_device, tflops, mfu, peak_flops_per_s_per_device and "
          "peak_label; energy_per_token_j, tokens_per_j, avg_power_w_per_device, "
          "energy_source and energy_note; the environment of each machine")
TOKEN_UNITS = ("token", "codon")  # what the tables' "tokens/s" counts (GenSLM's codons too)


def params_text(model: dict) -> str:
    """'1.56B' or '124M' parameters of a record's model dict; '?' where it cannot be read."""
    try:
        n = total_params(ModelConfig(**model))
    except (TypeError, ValueError, ConfigError):
        return "?"
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.3g}M"


def workload_of(record: Record) -> str | None:
    """The identity of the workload a cell measured (stored with it, or derived from an older
    record's spec by the same rule: store/fingerprint.py); None for records that are not cells."""
    return record.setup.workload_id or workload_id(record.kind, record.spec)


def workload(record: Record) -> str | None:
    """A workload's name for tables: 'block gpt2 124M seq 256 batch 8', 'train gpt2-xl 1.56B
    seq 1024 batch 16 dp=2'; None for records that are not cells."""
    s = record.setup
    if workload_of(record) is None:
        return None
    figure = compared_figure(record)
    if figure is not None and figure.label:
        return figure.label
    name = f"{s.benchmark or record.kind} {s.model_name} "
    name += f"{params_text(s.model or {})} seq {s.seq_len}"
    if isinstance(record.typed, BlockReading):
        return f"{name} batch {s.batch}"
    layout = short_layout(record)
    batch = global_batch(s)
    sparsity = f" sparsity {s.sparsity:g}" if s.sparsity else ""
    return f"{name} batch {batch} {layout}{sparsity}".strip()


@dataclass(frozen=True)
class Best:
    """A machine's best ok cell of one workload (and precision): the most tokens/s (its kind's
    compared figure) over all its devices."""

    machine: Machine
    record: Record
    total: Rate  # tokens/s, all devices
    per_device: Rate

    @property
    def figure(self) -> ComparedFigure:
        """What the cell is compared on, as its kind declares it."""
        return compared_figure(self.record)

    @property
    def unit(self) -> str:
        """token or codon (or what another kind's figure counts)."""
        return self.figure.unit

    def rate_text(self, rate: Rate) -> str:
        """One of its rates, with its unit after each number where it counts no tokens
        ('2 score/s')."""
        return rate.text() if self.unit in TOKEN_UNITS else rate.text(unit=f" {self.unit}/s")

    @property
    def mfu(self) -> Rate | None:
        """MFU with the spread of the cell's time."""
        mfu = self.figure.mfu
        return None if mfu is None else self.per_device.scaled(mfu / self.per_device.value)

    @property
    def tflops(self) -> float | None:
        """Model TFLOPS per device."""
        return self.figure.tflops


def _rates(record: Record) -> tuple[Rate, Rate] | None:
    """(all devices, per device) rates of an ok cell whose kind declares the figure it is
    compared on (block and training cells: tokens/s)."""
    figure = compared_figure(record) if record.status == "ok" else None
    if figure is None:
        return None
    total, each = figure_rate(figure, per_device=False), figure_rate(figure)
    return (total, each) if total and each else None


def _names(machines: list[Machine]) -> dict[str, str]:
    """Each workload identity's table name, unique within its precision (a workload whose name
    another one shares, e.g. they differ only in an fp8 recipe, gets its identity's first
    digits)."""
    named = {workload_of(r): (workload(r), str(r.setup.dtype)) for m in machines
             for r in m.records if workload_of(r) is not None}
    counts: dict[tuple[str, str], int] = {}
    for pair in named.values():
        counts[pair] = counts.get(pair, 0) + 1
    return {key: pair[0] if counts[pair] == 1 else f"{pair[0]} #{key[:6]}"
            for key, pair in named.items()}


def best_cells(machines: list[Machine]) -> dict[tuple[str, str], list[Best]]:
    """(workload, precision) -> each machine's best cell, in machine order; machines are
    compared only on identical workloads (workload_of), never on a name that two share."""
    names = _names(machines)
    found: dict[tuple, dict[int, Best]] = {}
    for m in machines:
        for r in m.records:
            key, rates = workload_of(r), _rates(r)
            if key is None or rates is None:
                continue
            group = (names[key], str(r.setup.dtype))
            best = found.setdefault(group, {}).get(m.index)
            if best is None or rates[0].value > best.total.value:
                found[group][m.index] = Best(m, r, *rates)
    return {k: [v[i] for i in sorted(v)] for k, v in sorted(found.items())}


def peak_of(record: Record) -> PeakFields | None:
    """The peak a cell's MFU divides by (its PeakFields), or None for a kind that has none."""
    return record.typed if carries(record.kind, PeakFields) else None


def peak_tflops(record: Record) -> str:
    """The dense peak a cell's MFU divides by, in TFLOPS ('-' where it has none)."""
    peak = peak_of(record)
    return tflops(None if peak is None else peak.peak_flops_per_s_per_device)


def peak_source(record: Record) -> str:
    """'datasheet', 'measured GEMM' or 'none': what the MFU divides by."""
    peak = peak_of(record)
    label = str((peak.peak_label if peak is not None else None) or "none")
    if label.startswith("datasheet"):
        return "datasheet"
    return "measured GEMM" if label.startswith("measured") else "none"


def cell_settings(record: Record) -> str:
    """'batch 2' (block) or 'mb 2 gas 4 recompute none, 1 device(s)'."""
    s = record.setup
    if isinstance(record.typed, BlockReading):
        return f"batch {s.batch}"
    if not is_training(record):
        return "-"
    return (f"mb {s.micro_batch} gas {s.gas} recompute {s.recompute}, "
            f"{devices_of(record)} device(s)")


def devices_of(record: Record) -> int:
    """The devices a compared cell ran on (a block cell: one)."""
    return compared_figure(record).devices


def _headline(best: dict[tuple, list[Best]]) -> tuple[int, ...]:
    """The rows (a row per machine of each workload, in table order) of each machine's
    highest-MFU workload of each benchmark and model: the default view of a long table."""
    chosen: dict[tuple, tuple[float, int]] = {}
    flat = [b for items in best.values() for b in items]
    for i, b in enumerate(flat):
        s = b.record.setup
        key = (b.machine.index, s.benchmark or b.record.kind, s.model_name)
        score = b.mfu.value if b.mfu else 0.0
        if key not in chosen or score > chosen[key][0]:
            chosen[key] = (score, i)
    return tuple(sorted(i for _, i in chosen.values()))


def _rate_header(best: dict[tuple, list[Best]], scope: str) -> str:
    """'tokens/s per device', or 'rate per device' where a workload counts something else (its
    rates then name their unit)."""
    tokens = all(b.unit in TOKEN_UNITS for items in best.values() for b in items)
    return f"{'tokens/s' if tokens else 'rate'} {scope}"


def mfu_table(best: dict[tuple, list[Best]]) -> Table:
    """Per device and precision: tokens/s, TFLOPS and MFU against each machine's own peak."""
    rows = tuple((name, precision, b.machine.label, b.rate_text(b.per_device),
                  num(b.tflops, ".3g"), b.mfu.text(".2%") if b.mfu else "-",
                  peak_tflops(b.record),
                  peak_source(b.record), cell_settings(b.record))
                 for (name, precision), items in best.items() for b in items)
    return Table("Per device and precision", ("workload", "precision", "machine",
                                               _rate_header(best, "per device"),
                                               "TFLOPS per device",
                                               "MFU", "dense peak TFLOPS", "peak source",
                                               "best cell"), rows,
                 "Each machine's best cell per workload and precision, MFU against its own "
                 "peak; shown: each benchmark and model's highest MFU.",
                 "Best: the most tokens/s over all its devices. GenSLM workloads count codons.",
                 _headline(best))


def training(b: Best) -> bool:
    """A training workload (a block cell is one layer, not a model to train)."""
    return is_training(b.record)


def time_table(best: dict[tuple, list[Best]], tokens: float) -> Table | None:
    """Time and energy to train `tokens` tokens at each machine's best measured training cell;
    None where no training workload ran."""
    train = {k: [b for b in items if training(b)] for k, items in best.items()}
    train = {k: items for k, items in train.items() if items}
    if not train:
        return None
    rows = tuple((name, precision, b.machine.label, str(devices_of(b.record)),
                  b.total.text(), duration(tokens / b.total.value), energy_text(b.record, tokens))
                 for (name, precision), items in train.items() for b in items)
    return Table(f"Time to train {tokens:,.3g} tokens",
                 ("workload", "precision", "machine", "devices", "tokens/s (all devices)",
                  "time", "energy"), rows,
                 f"{tokens:,.0f} tokens (codons for GenSLM) at each machine's best measured "
                 "rate of each training workload; shown: each model's highest MFU.",
                 "All the cell's devices count. Energy: that cell's joules per token over its "
                 "timed steps, times the tokens, or why it has none (docs/energy.md).",
                 _headline(train))


def _speedup_rows(name: str, precision: str, items: list[Best], base: Machine
                  ) -> list[tuple[str, ...]]:
    ref = next((b for b in items if b.machine.index == base.index), None)
    rows = []
    for b in items:
        if ref is None:
            total = each = "baseline did not run it"
        elif b is ref:
            total = each = "baseline"
        else:  # with its interval and verdict from both cells' trials (report/evidence.py)
            total = speedup_text(ref.record, b.record, b.total.value / ref.total.value)
            each = f"{b.per_device.value / ref.per_device.value:.2f}x"
        rows.append((name, precision, b.machine.label, b.rate_text(b.total), total, each))
    return rows


def speedup_table(best: dict[tuple, list[Best]], base: Machine) -> Table:
    """Each machine's best tokens/s over the baseline machine's, all devices and per device."""
    shared = {k: items for k, items in best.items() if len(items) > 1}
    rows = tuple(row for (name, precision), items in shared.items()
                 for row in _speedup_rows(name, precision, items, base))
    return Table(f"Speedup over {base.label}", ("workload", "precision", "machine",
                                               _rate_header(shared, "(all devices)"),
                                               "speedup",
                                               "speedup per device"), rows,
                 "Each machine's best tokens/s over the baseline's on the same workload and "
                 "precision, with the ratio's interval; per device: the plain ratio.",
                 "Only workloads more than one machine ran are listed.")


def compare_figure(best: dict[tuple, list[Best]], machines: list[Machine], base: Machine
                   ) -> Figure:
    """Bars: MFU per workload and precision (the highest-MFU workloads of each benchmark and
    model, as the table's headline), and with more than one machine the speedup over the
    baseline."""
    keep = set(_headline(best))
    flat = [(k, b) for k, items in best.items() for b in items]
    kept_keys = list(dict.fromkeys(flat[i][0] for i in sorted(keep)))
    shown = {k: best[k] for k in kept_keys}
    categories = tuple(_category(items[0].record) for items in shown.values())
    mfu, speed = [], []
    for m in machines:
        at = [(i, b) for i, items in enumerate(shown.values()) for b in items
              if b.machine.index == m.index]
        mfus = [(i, b.mfu) for i, b in at if b.mfu]
        mfu.append(Series(m.label, tuple(float(i) for i, _ in mfus),
                          tuple(r.value for _, r in mfus), tuple(r.low for _, r in mfus),
                          tuple(r.high for _, r in mfus)))
        refs = {i: b for i, items in enumerate(shown.values()) for b in items
                if b.machine.index == base.index}
        ups = [(i, b.total.scaled(1 / refs[i].total.value)) for i, b in at
               if i in refs and m.index != base.index]
        speed.append(Series(m.label, tuple(float(i) for i, _ in ups),
                            tuple(r.value for _, r in ups), tuple(r.low for _, r in ups),
                            tuple(r.high for _, r in ups)))
    panels = [Panel("MFU (each machine's own peak)", "MFU (fraction of dense peak)",
                    "", tuple(mfu), categories=categories)]
    if len(machines) > 1:
        panels.append(Panel(f"speedup over {base.label}", "speedup (tokens/s over baseline)",
                            "", tuple(s for s in speed if s.x), categories=categories))
    return Figure("compare_machines", "Machines compared: MFU" + (
        " and speedup" if len(machines) > 1 else ""), tuple(panels),
        "Each machine's best cell of each benchmark and model's highest-MFU workload"
        + (", and its speedup over the baseline." if len(machines) > 1 else "; one machine, so "
           "no speedup is drawn."))


def _category(record: Record) -> str:
    """A workload's short name on a bar axis: 'train gpt2-tiny seq 256 mb 4 cp=2 fp32'."""
    s = record.setup
    figure = compared_figure(record)
    if figure is not None and figure.label:
        return figure.label
    model = str(s.model_name).split(":")[0]
    block = isinstance(record.typed, BlockReading)
    size = f"batch {s.batch}" if block else f"mb {s.micro_batch}"
    layout = "" if block else short_layout(record)
    return " ".join(w for w in (s.benchmark or record.kind, model, f"seq {s.seq_len}",
                                size, layout, str(s.dtype)) if w)


def compare_section(machines: list[Machine], base: Machine, tokens: float) -> Section:
    """Per device and precision, time to train, speedup over the baseline (more than one
    machine)."""
    best = best_cells(machines)
    title = "Comparing machines"
    if not best:
        return Section("compare", title, SOURCE, ("No ok block or training cells to compare.",
                                                  noise_sentence(machines)))
    text = ((f"{len(machines)} machines; baseline {base.label} (choose another with --baseline "
             "NAME or NUMBER).", noise_sentence(machines)) if len(machines) > 1 else ())
    energy = energy_table(best, tokens)
    text += () if energy else (unavailable_text(best),)
    timed = time_table(best, tokens)
    tables = (mfu_table(best), *((timed,) if timed else ()),
              *((speedup_table(best, base),) if len(machines) > 1 else ()))
    return Section("compare", title, SOURCE, text, (compare_figure(best, machines, base),),
                   tables + ((energy,) if energy else ()))
