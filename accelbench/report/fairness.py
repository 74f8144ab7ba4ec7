"""The fairness section: for each workload run on more than one machine, what differs
between the machines' best runs of it (precision, batch, micro-batch, GAS, recompute, layout,
devices, software versions, where the peak came from): the paper's own complaint about
comparing accelerators fairly."""

from __future__ import annotations

from collections.abc import Callable

from accelbench.report.cells import canonical, is_training, layout_text
from accelbench.report.compare import Best, best_cells, devices_of, peak_of, peak_source
from accelbench.report.content import Section, Table
from accelbench.report.machines import Machine, short_version
from accelbench.report.paper import cite
from accelbench.store.record import Record

SOURCE = ("each machine's best ok cell of each workload (store/fingerprint.py WORKLOAD_FIELDS: "
          "benchmark, model shape, sequence, global batch, precision, layout, sparsity): its "
          "spec, its metrics' peak_label and optimizer, its environment")


def _spec(field: str) -> Callable[[Record], str]:
    return lambda r: "-" if getattr(r.setup, field) is None else str(getattr(r.setup, field))


def _env(field: str) -> Callable[[Record], str]:
    return lambda r: "-" if r.environment.get(field) is None else str(r.environment.get(field))


def gpu_clock(record: Record) -> str:
    """The GPU's SM clock at the timed window's edges and the reasons NVML gave for it (an
    NVIDIA GPU's, rank 0's for a launched cell): a card held at its power cap runs below the
    clock its datasheet peak assumes, which an MFU comparison should say."""
    raw = record.raw
    disturbance = raw.get("disturbance") or (raw.get("rank0") or {}).get("disturbance") or {}
    edges = [(disturbance.get("gpu") or {}).get(e) or {} for e in ("start", "end")]
    clocks = [e["sm_clock_mhz"] for e in edges if e.get("sm_clock_mhz")]
    if not clocks:
        return "-"
    reasons = sorted({r for e in edges for r in e.get("clock_reasons", [])})
    text = " to ".join(f"{c:,}" for c in clocks) + " MHz"
    return text + (f" ({', '.join(reasons)})" if reasons else "")


def _peak_precision(record: Record) -> str | None:
    peak = peak_of(record)
    return None if peak is None else peak.peak_precision


FIELDS: tuple[tuple[str, Callable[[Record], str]], ...] = (
    ("precision", _spec("dtype")),
    ("batch (block)", _spec("batch")),
    ("micro-batch", _spec("micro_batch")),
    ("GAS", _spec("gas")),
    ("recompute", _spec("recompute")),
    ("layout", layout_text),
    ("devices", lambda r: str(devices_of(r))),
    ("compile", _spec("compile")),
    ("tf32", _spec("tf32")),
    ("timed steps or repetitions", lambda r: str(r.setup.steps or r.setup.repeats)),
    ("data", _spec("data")),
    ("optimizer", lambda r: str((r.typed.optimizer if is_training(r) else None) or "-")),
    ("peak source", lambda r: f"{peak_source(r)} ({_peak_precision(r) or '-'})"),
    ("torch", lambda r: short_version(r.environment.get("torch"))),
    ("torch build", _env("torch")),
    ("CUDA runtime", _env("cuda_runtime")),
    ("HIP runtime", _env("hip_runtime")),
    ("driver", _env("driver_version")),
    ("GPU SM clock at the window's edges", gpu_clock),
    ("python", _env("python")),
    ("CPU threads", _env("torch_threads")),
    ("accelbench", _env("accelbench")),
    ("git revision", _env("git_revision")),
)


def differences(items: list[Best]) -> list[tuple[str, list[str]]]:
    """(field, value per machine) for each field whose values differ between the runs."""
    found = []
    for name, read in FIELDS:
        values = [read(b.record) for b in items]
        if len(set(map(canonical, values))) > 1:
            found.append((name, values))
    return found


def fairness_section(machines: list[Machine]) -> Section:
    """One row per workload and differing field, a column per machine."""
    title = "Fairness: what differs between the machines' runs"
    intro = ("The paper notes that precision and batch size differ from system to system "
             f"({cite('sec. V-B1, table II')}); a comparison is only as fair as its runs are "
             "alike. "
             "Machines are compared only on identical workloads (the same model shape, "
             "sequence, global batch, precision, layout and sparsity); for each workload run on "
             "more than one machine, the best run of each machine (the one the comparison uses) "
             "is compared field by field.")
    shared = [(f"{name} {precision}", items)
              for (name, precision), items in best_cells(machines).items() if len(items) > 1]
    if len(machines) < 2 or not shared:
        return Section("fairness", title, SOURCE, ("One machine, or no workload run on more "
                                                   "than one: nothing to compare.",))
    header = ("workload", "what differs", *(m.label for m in machines))
    rows, same = [], []
    for name, items in shared:
        by_machine = {b.machine.index: b for b in items}
        diffs = differences(items)
        if not diffs:
            same.append(name)
        for field, values in diffs:
            value_of = dict(zip((b.machine.index for b in items), values, strict=True))
            rows.append((name, field, *(value_of.get(m.index, "not run")
                                        if m.index in by_machine else "not run"
                                        for m in machines)))
    text = (f"Alike in every compared field: {', '.join(same)}.",) if same else ()
    return Section("fairness", title, SOURCE, text, (), (Table(
        "Differences between the machines' best runs", header, tuple(rows),
        "Only fields whose values differ are listed; 'not run': the machine has no ok cell "
        "of that workload."),), methods=(intro,))
