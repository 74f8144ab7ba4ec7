"""Figure 7 of the study (weight sparsity): speedup and loss against the sparsity level,
from kind 'train' records of sweeps with a sparse level (spec.sparsity > 0 in one of a
configuration's cells); when there are none, the paper's
published speedups are drawn alone, labelled as published."""

from __future__ import annotations

from accelbench.report.cells import (
    Rate,
    canonical,
    is_training,
    num,
    points_series,
    train_rate,
    varying_label,
)
from accelbench.report.content import PUBLISHED, Figure, Finding, Panel, Section, Series, Table
from accelbench.report.evidence import speedup, speedup_text
from accelbench.report.findings import prefixed, verdicts_text
from accelbench.report.machines import Machine
from accelbench.report.paper import (
    FIG7_LOSS,
    FIG7_SPARSITY,
    FIG7_SYSTEM,
    cite,
)
from accelbench.report.training import cell_key
from accelbench.store.record import Record

SOURCE = ("kind 'train' records with spec.sparsity: tokens_per_s_per_device (step_time_s_min/"
          f"max) and loss_last against the dense cell's; the study's figure 7 ({cite('fig. 7')}:"
          " Cerebras CS-2, sparsity 0, 0.6, 0.8 and 0.9)")
NO_RECORDS = ("No sparsity records: the figure shows the paper's published speedups alone, "
              "labelled as published.")


def _groups(machines: list[Machine]) -> dict[tuple, list[Record]]:
    """(machine, the cell less its sparsity) -> its records, by sparsity."""
    groups: dict[tuple, list[Record]] = {}
    for m in machines:
        for r in m.records:
            if is_training(r) and r.setup.sparsity is not None:
                dense = {k: v for k, v in r.spec.items() if k != "sparsity"}
                key = (m.index, m.label, cell_key(Record("train", "ok", dense, {})),
                       canonical(r.setup.layout), canonical(r.setup.compile),
                       canonical(r.setup.sparsity_pattern))  # a 2:4 sweep's own dense
                groups.setdefault(key, []).append(r)
    # every training cell records its level (0.0: dense); a group is a sparsity sweep only when
    # one of its cells is sparse
    return {k: sorted(v, key=lambda r: float(r.setup.sparsity)) for k, v in groups.items()
            if any(float(r.setup.sparsity) > 0 for r in v)}


def _relative(records: list[Record], value) -> list[tuple[float, Rate | None, bool]]:
    """Each level's value over the dense (sparsity 0) cell's."""
    dense = [value(r) for r in records if float(r.setup.sparsity) == 0 and r.status == "ok"]
    base = dense[0] if dense and dense[0] else None
    return [(float(r.setup.sparsity), value(r).scaled(1 / base.value)
             if base and r.status == "ok" and value(r) else None, r.status == "oom")
            for r in records]


def _loss(r: Record) -> Rate | None:
    loss = r.typed.loss_last
    return Rate(loss) if loss is not None else None


def _published() -> tuple[list[Series], list[Series]]:
    """The paper's stated speedups and loss at a stated level, from 1.0 when dense."""
    speed = [Series(f"published: {FIG7_SYSTEM} {p.model}", (0.0, p.sparsity),
                    (1.0, (p.speedup_low + p.speedup_high) / 2), (1.0, p.speedup_low),
                    (1.0, p.speedup_high), PUBLISHED)
             for p in FIG7_SPARSITY if p.sparsity is not None]
    level, worse = FIG7_LOSS
    loss = [Series(f"published: {FIG7_SYSTEM} GPT-2 XL, after 3B tokens", (0.0, level),
                   (1.0, 1.0 + worse), kind=PUBLISHED)]
    return speed, loss


def _figure(groups: dict[tuple, list[Record]]) -> Figure:
    labels = varying_label([{"machine": k[1], "model": str(rs[0].setup.model_name),
                             "precision": str(rs[0].setup.dtype)}
                            for k, rs in groups.items()])
    items = list(zip(labels, groups.values(), strict=True))
    speed = [points_series(lab, _relative(rs, train_rate)) for lab, rs in items]
    loss = [points_series(lab, _relative(rs, _loss)) for lab, rs in items]
    pub_speed, pub_loss = _published()
    masked = any(masked_dense(r) for rs in groups.values() for r in rs)
    ours = ("ours: speedup over dense" + (f" ({MASKED}: 1x expected)" if masked else ""))
    return Figure("fig7_sparsity", "Weight sparsity: speedup and loss against sparsity level",
                  (Panel(ours, "weight sparsity (fraction of weights zero)",
                         "speedup (tokens/s over dense)", tuple(speed)),
                   Panel(f"published: {FIG7_SYSTEM} (sparse kernels)",
                         "weight sparsity (fraction of weights zero)",
                         "speedup (tokens/s over dense)", tuple(pub_speed)),
                   Panel("loss", "weight sparsity (fraction of weights zero)",
                         "loss relative to dense", tuple(loss + pub_loss))),
                  f"The study's figure 7: ours apart from the {FIG7_SYSTEM}'s, which ran sparse "
                  f"kernels; a {MASKED} cell multiplies its zeros, so 1x is expected. Loss: "
                  "about 15% worse after 3B tokens in the paper.",
                  f"The {FIG7_SYSTEM}'s GPT-2 XL at sparsity 0.9 (1.8-2x, {cite('fig. 7')}) is "
                  "drawn as its midpoint with the range as the bar; a masked-dense ratio above "
                  "or below 1 is noise or the masks' cost, not a finding.")


def _published_table() -> Table:
    rows = tuple((FIG7_SYSTEM, p.model, "level not restated" if p.sparsity is None
                  else num(p.sparsity, ".1f"),
                  f"{p.speedup_low:.2f}x" if p.speedup_low == p.speedup_high
                  else f"{p.speedup_low:.1f}-{p.speedup_high:.1f}x", cite("fig. 7"))
                 for p in FIG7_SPARSITY)
    return Table("Published sparsity speedups", ("system", "model", "sparsity", "speedup",
                                                 "source"), rows,
                 "The paper's stated speedups; the GPT-3 ones restate no sparsity level, so "
                 "they are listed, not drawn.", headline=())


MASKED = "masked dense"
NO_SPEEDUP = "no sparse kernel ran: no speedup expected"


def masked_dense(r: Record) -> bool:
    """A sparse cell whose zeros were multiplied like any weight (no sparse kernel ran)."""
    return float(r.setup.sparsity) > 0 and not r.typed.sparse_kernel


def _kernel_text(r: Record) -> str:
    """What ran the sparse matrices: the kernel, or that none did (masked dense) and why."""
    if float(r.setup.sparsity) == 0:
        return "dense"
    if masked_dense(r):  # the record's reason where it says more than that
        why = r.typed.sparse_kernel_reason
        return f"{MASKED}: {NO_SPEEDUP}" + (f" ({why})" if why and "no sparse kernel ran"
                                              not in why else "")
    return str(r.typed.sparse_kernel)


def _dense_of(records: list[Record]) -> Record | None:
    """The sweep's ok dense cell, the base of its speedups."""
    return next((r for r in records if float(r.setup.sparsity) == 0 and r.status == "ok"),
                None)


def _cells_table(groups: dict[tuple, list[Record]]) -> Table:
    """Every cell of every sparsity sweep: its rate and loss over its dense cell's."""
    rows = []
    for key, records in groups.items():
        speed, loss = _relative(records, train_rate), _relative(records, _loss)
        dense = _dense_of(records)
        for r, (_, up, _), (_, rel, _) in zip(records, speed, loss, strict=True):
            rate = train_rate(r) if r.status == "ok" else None
            claim = ("baseline" if r is dense else
                     speedup_text(dense, r, up.value, not masked_dense(r)) if up and dense
                     else "-")
            rows.append((key[1], str(r.setup.model_name), str(r.setup.dtype),
                         str(r.setup.sparsity_pattern or "unstructured"),
                         num(float(r.setup.sparsity), "g"), r.status,
                         rate.text() if rate else "-", claim,
                         f"{rel.text('.3f')} (one seed)" if rel else "-", _kernel_text(r)))
    return Table("Sparsity cells", ("machine", "model", "precision", "pattern", "sparsity",
                                    "status", "tokens/s per device", "speedup over dense",
                                    "loss over dense", "kernel"), tuple(rows),
                 "Each level's tokens/s and its speedup over the same sweep's dense cell, with "
                 "their intervals; loss over dense after the same steps (one seed).",
                 f"Kernel: what ran the masked matrices, or that nothing sparse did: a {MASKED} "
                 "cell multiplies its zeros, so no speedup is expected and none is claimed.")


def _findings(groups: dict[tuple, list[Record]]) -> tuple[Finding, ...]:
    """Per sweep: every level's speedup over dense in one phrase, what ran it, the loss."""
    found = []
    for key, records in groups.items():
        dense = _dense_of(records)
        if dense is None:
            continue
        speed, loss = _relative(records, train_rate), _relative(records, _loss)
        items, losses = [], []
        for r, (level, up, _), (_, rel, _) in zip(records, speed, loss, strict=True):
            if r is dense or r.status != "ok":
                continue
            items.append((f"{level:g}", speedup(dense, r, not masked_dense(r)),
                          up.value if up else None))
            if rel:
                losses.append(rel.value)
        masked = any(masked_dense(r) for r in records)
        s = dense.setup
        what = f"{s.model_name} {s.dtype}" + (
            f", {MASKED}: 1x expected" if masked else "")
        text = f"Weight sparsity over dense ({what}): {verdicts_text(items)}"
        if losses:
            text += f"; loss {min(losses):.3f}-{max(losses):.3f} of dense (one seed)"
        found.append(Finding(prefixed(key[1], text, len(groups) > 1), "sparsity"))
    return tuple(found)


def sparsity_section(machines: list[Machine]) -> Section:
    """Figure 7: ours where records exist, the paper's stated values beside (or alone)."""
    groups = _groups(machines)
    text = () if groups else (NO_RECORDS,)
    tables = ((_cells_table(groups),) if groups else ()) + (_published_table(),)
    return Section("sparsity", "Weight sparsity (figure 7)", SOURCE, text,
                   (_figure(groups),), tables, _findings(groups))
