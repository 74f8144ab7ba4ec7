"""`accelbench plan`'s output, a view of the planner's results: the ranked layouts' table, the
notes below it (intervals, flags, what a precision, sparsity or mixture of experts assumed) and
the JSON, gathered as a PlanView the command prints (no printing here). The --validate view
is report/plan_validation.py."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from rich.table import Table

from accelbench.analytics.compute_rates import compute_source, sparse_compute_note
from accelbench.analytics.confidence import EVIDENCE, Confidence
from accelbench.analytics.plan_input import PlanOutcome, PlanRequest, moe_imbalance_text
from accelbench.analytics.planner import NOT_BUILT, PlanResult
from accelbench.analytics.published_run import reduce_bytes, reduce_source, stack_framework
from accelbench.analytics.source_model import MIN_SOURCES
from accelbench.analytics.train_setup import OVERLAP_MODES
from accelbench.analytics.training_widths import training_widths
from accelbench.config.layout import Layout
from accelbench.config.vocab import GB
from accelbench.report.table import add_plain_row, plain_table


@dataclass
class PlanView:
    """What a plan command prints: `data` (JSON text) and `shown` (tables, widened by --wide,
    and lines) on stdout, `said` (what went wrong) on stderr, then exit with `code`."""

    data: str | None = None
    shown: list[Table | str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    code: int = 0


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


# Each column with its priority (report/table_width.py: 0 always shown; 1, 2, ...: left out when
# narrow, the largest first): the layout and the plan's figures with their intervals stay (the
# flags are also the "!" lines below the table).
_PLAN_COLUMNS = {"#": 0, "dp": 0, "tp": 0, "pp": 0, "vp": 2, "cp": 2, "ep": 2, "mb": 0,
                 "zero": 0, "recompute": 1, "sp": 2, "mem GB/dev": 1, "tok/s": 0, "MFU": 0,
                 "HFU": 4, "step s": 1, "bubble": 3, "comm": 3, "recomp": 4, "limit": 1,
                 "days": 1, "flags": 1}


def _rate(value: float, low: float, high: float) -> str:
    """'185k (164-209k)': a rate and its interval, compact."""
    for scale, unit in ((1e6, "M"), (1e3, "k")):
        if value >= 10 * scale:
            digits = 1 if value < 100 * scale and unit == "M" else 0
            return (f"{value / scale:.{digits}f}{unit} ({low / scale:.{digits}f}-"
                    f"{high / scale:.{digits}f}{unit})")
    return f"{value:,.0f} ({low:,.0f}-{high:,.0f})"


def _flag_cell(c: Confidence | None) -> str:
    """The kinds of a layout's flags ('memory, mfu'; thin evidence with its count of shipped
    sources: 'evidence:1'), '-' when within the envelope."""
    if not c or not c.flags:
        return "-"
    return ", ".join(f"{f.kind}:{f.value.split()[0]}" if f.kind == EVIDENCE else f.kind
                     for f in c.flags)


def _rate_cells(r: PlanResult, c: Confidence | None, train_tokens: float) -> list[str]:
    """Rates with their 80% intervals and the time split of a layout; blank for one that does
    not fit (it cannot run)."""
    s = r.step
    if not r.memory.fits:
        return ["-"] * 7 + ["does not fit", "-", _flag_cell(c)]
    comm = s.comm_exposed_s
    if c is None:
        rates = [f"{s.tokens_per_s:,.0f}", f"{s.mfu:.1%}", f"{s.step_s:.2f}"]
    else:
        iv = c.interval
        low, high = iv.time(s.step_s)
        mfu_low, mfu_high = iv.throughput(s.mfu)
        rates = [_rate(s.tokens_per_s, *iv.throughput(s.tokens_per_s)),
                 f"{s.mfu:.1%} ({100 * mfu_low:.0f}-{100 * mfu_high:.0f})",
                 f"{s.step_s:.2f} ({low:.3g}-{high:.3g})"]
    return [rates[0], rates[1], f"{s.hfu:.1%}", rates[2],
            _pct(s.bubble_s, s.step_s), _pct(comm, s.step_s), _pct(s.recompute_s, s.step_s),
            r.limiter, f"{s.days_for_tokens(train_tokens):.1f}", _flag_cell(c)]


def plan_table(results: list[PlanResult], title: str, train_tokens: float,
                confidence: list[Confidence] | None = None) -> Table:
    """The ranked layouts with what limits each, their 80% intervals and flags; a '*' on the
    rank of one accelbench's runtime does not build (see _runtime_notes)."""
    table = plain_table(title)
    for col, priority in _PLAN_COLUMNS.items():
        table.add_column(col, justify="left" if col in ("recompute", "limit", "flags")
                         else "right", priority=priority, whole=col != "flags")
    for i, r in enumerate(results, 1):
        lay = r.layout
        add_plain_row(
            table, f"{i}{'' if r.built_by_runtime else '*'}", str(lay.dp), str(lay.tp),
            _stages_cell(lay), str(lay.vp), str(lay.cp), str(lay.ep), str(lay.mb), str(lay.zero),
            lay.recompute, "on" if lay.sp else "off",
            f"{r.memory.total / GB:.1f} ({_pct(r.memory.total, r.memory.usable_bytes)})",
            *_rate_cells(r, confidence[i - 1] if confidence else None, train_tokens))
    return table


def _ranks(at: list[int]) -> str:
    return ", ".join(f"#{i}" for i in at)


def _confidence_notes(outcome: PlanOutcome, request: PlanRequest) -> list[str]:
    """What the intervals are (per residual group, with the ranks using it), each flagged
    layout's reasons, and how many layouts the headroom moved down."""
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(outcome.confidence, 1):
        groups.setdefault(c.interval.group, []).append(i)
    lines = ["(ranges): 80% prediction intervals of tok/s, MFU and step s, estimates from the "
             "shipped runs' leave-one-source-out residuals, the source a level of its own "
             f"(--stack {request.stack}; docs/planner.md): "
             + "; ".join(f"{_ranks(at)} {group}" for group, at in groups.items())
             + ("; --efficiency given: they are the built-in curves' residuals, not those of "
                "the efficiency chosen" if request.efficiency is not None else "")]
    flagged: dict[tuple[str, str], list[str]] = {}
    for i, c in enumerate(outcome.confidence, 1):
        for flag in c.flags:
            flagged.setdefault((flag.kind, flag.reason), []).append(
                f"#{i}" + (f" {flag.value}" if flag.value else ""))
    lines += [f"! {kind} ({', '.join(at)}): {reason}" for (kind, reason), at in flagged.items()]
    thin = sum(any(f.kind == EVIDENCE for f in c.flags) for c in outcome.confidence)
    if thin:
        lines.append(f"evidence: {thin} of the {len(outcome.confidence)} layouts shown rest on "
                     f"fewer than {MIN_SOURCES} shipped sources (their interval's spread is "
                     "borrowed from the other sources)")
    found = outcome.search
    if found is not None and found.n_over_headroom:
        lines.append(f"{found.n_over_headroom} of {found.n_fit} layouts that fit use more than "
                     f"{request.headroom:.0%} of usable memory (--memory-headroom): ranked "
                     "after "
                     "those within it")
    return lines


def _stages_cell(lay: Layout) -> str:
    """pp, with the first and last stages' layer counts when uneven ('16 (7..7)')."""
    if not lay.uneven:
        return str(lay.pp)
    return f"{lay.pp} ({lay.pp_first or '='}..{lay.pp_last or '='})"


def _precision_notes(results: list[PlanResult], dtype: str) -> list[str]:
    """Under fp8, what MFU divides by and each layout's utilisation of the FP8 peak."""
    if dtype != "fp8":
        return []
    shares = ", ".join(f"#{i} {r.step.fp8_peak_utilisation:.1%}"
                       for i, r in enumerate(results, 1)
                       if r.memory.fits and r.step.fp8_peak_utilisation is not None)
    return [f"fp8: MFU and HFU against the dense {results[0].step.mfu_peak} peak (as NeMo and "
            f"torchtitan publish it); utilisation of the dense FP8 peak: {shares or '-'}"]


def _sparsity_notes(results: list[PlanResult], request: PlanRequest) -> list[str]:
    """What a sparse plan assumed: the masks' memory and where the GEMMs run."""
    setup = request.setup
    if not setup.sparsity:
        return []
    return [f"sparsity {setup.sparsity:g} ({setup.sparsity_pattern}): masks "
            f"{results[0].memory.masks / GB:.2f} GB per device in #1; "
            f"{sparse_compute_note(setup, request.cluster.device)}; MFU counts the "
            "dense-equivalent FLOPs"]


def _moe_notes(results: list[PlanResult], request: PlanRequest) -> list[str]:
    """A mixture of experts: what MFU counts and each layout's all-to-all share of the step."""
    model = request.model
    if not model.n_experts:
        return []
    shares = ", ".join(f"#{i} {_pct(r.step.ep_comm_s, r.step.step_s)}"
                       for i, r in enumerate(results, 1) if r.memory.fits)
    return [f"mixture of experts ({model.n_experts} experts, top-{model.moe_top_k}): MFU "
            f"counts the active parameters; expert-parallel all-to-all share of the step: "
            f"{shares or '-'} (docs/planner.md, MoE)"]


def _runtime_notes(results: list[PlanResult]) -> list[str]:
    """'* #2, #5 not built by accelbench's runtime: <reason>', one line per reason."""
    ranks: dict[str, list[str]] = {}
    for i, r in enumerate(results, 1):
        if r.runtime_note:
            ranks.setdefault(r.runtime_note, []).append(f"#{i}")
    return [f"* {', '.join(at)} {NOT_BUILT}: {note}" for note, at in ranks.items()]


def _reduce_note(stack: str, dtype: str) -> str:
    """The width the plan priced the data-parallel reduction at, and why."""
    framework = stack_framework(stack)
    width = reduce_bytes(framework, dtype)
    widths = training_widths(dtype)
    if framework is None or widths.reduce != 4 or widths.grads == 4:
        return (f"{width} bytes a gradient value, {dtype}'s default (Megatron-LM reduces bf16 "
                "and fp8 gradients in fp32, as accelbench's runtime does; fp16 in fp16)")
    return f"{width} bytes a gradient value, {stack}'s: {reduce_source(framework, dtype)[1]}"


def _assumptions(request: PlanRequest) -> dict[str, str]:
    """Where the compute rates come from, what the overlap hides and, for a mixture of experts,
    the load imbalance, as the plan states them."""
    stated = {"compute": compute_source(request.cluster),
              f"overlap {request.setup.overlap}": OVERLAP_MODES[request.setup.overlap],
              "data-parallel reduction": _reduce_note(request.stack, request.setup.dtype)}
    if request.model.n_experts:
        stated[f"moe imbalance {request.setup.moe_imbalance:g}"] = moe_imbalance_text(
            request.model, request.setup.moe_imbalance)
    return stated


def _header(outcome: PlanOutcome) -> str:
    """'given layout', or how the search went."""
    found = outcome.search
    if found is None:
        return "given layout"
    return (f"{found.n_evaluated} layouts, {found.n_fit} divide and fit, "
            f"{found.layouts_per_s:,.0f} layouts/s")


def _plan_json(request: PlanRequest, outcome: PlanOutcome, header: str, rejected: str) -> str:
    """The plan as JSON: model, cluster, set-up, assumptions, how the search went and the
    ranked layouts, each with its interval and flags."""
    cluster = request.cluster
    return json.dumps({"model": request.model.name, "cluster": cluster.to_dict(),
                       "setup": asdict(request.setup), "assumptions": _assumptions(request),
                       "stack": request.stack, "search": header, "rejected": rejected,
                       "memory_headroom": request.headroom,
                       "over_headroom": outcome.search.n_over_headroom
                       if outcome.search else None,
                       "best": [{**r.to_dict(), **c.to_dict(r, cluster.n_devices,
                                                            request.train_tokens)}
                                for r, c in zip(outcome.results, outcome.confidence,
                                                strict=True)]},
                      indent=2)


def plan_view(request: PlanRequest, outcome: PlanOutcome, json_out: bool) -> PlanView:
    """Table (or JSON) on stdout; exit 1 when nothing fits or the given layout does not,
    saying why on stderr."""
    header, results = _header(outcome), outcome.results
    rejected = outcome.search.rejection_summary() if outcome.search else ""
    cluster, setup = request.cluster, request.setup
    view = PlanView()
    if json_out:
        view.data = _plan_json(request, outcome, header, rejected)
    if not results:
        view.said = [f"no layout divides and fits ({header})"]
        view.said += [f"rejected: {rejected}"] if rejected else []
        view.code = 1
        return view
    if not json_out:
        title = (f"{request.model.name} on {cluster.n_devices} x {cluster.device.key}: "
                 f"batch {setup.global_batch} x {setup.seq_len}, {setup.dtype}; {header}")
        view.shown.append(plan_table(results, title, request.train_tokens,
                                     outcome.confidence))
        if ":" in cluster.device.key:
            view.shown.append(f"device {cluster.device.key}: {cluster.device.source}")
        view.shown.append("; ".join(f"{k}: {v}" for k, v in _assumptions(request).items()))
        view.shown += (_confidence_notes(outcome, request) + _runtime_notes(results)
                       + _precision_notes(results, setup.dtype)
                       + _sparsity_notes(results, request) + _moe_notes(results, request))
    if outcome.search is None and not results[0].memory.fits:
        mem = results[0].memory
        view.said = [f"does not fit: {mem.total / GB:.1f} GB per device against "
                     f"{mem.usable_bytes / GB:.1f} GB usable"]
        view.code = 1
    return view


