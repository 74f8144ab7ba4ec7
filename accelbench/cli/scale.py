"""`accelbench scale`'s body: the scaling study (throughput, speedup, scaling efficiency)."""

from __future__ import annotations

from rich.text import Text

from accelbench.cli.common import cell_lines, check_emit, console, emit, table_console
from accelbench.cli.options import Outputs
from accelbench.cli.train import recorded, sweep_view
from accelbench.config.record_kinds import carries
from accelbench.config.records.train import TrainMetrics
from accelbench.config.workload import Workload
from accelbench.report.table import scale_table, train_table
from accelbench.workloads.scale.options import ScaleOptions


def run_scale(workload: Workload, options: ScaleOptions, out: Outputs) -> None:
    """`accelbench scale`: one training cell at each device count, then table II's columns."""
    from accelbench.bench.recording.resume import stored_summary
    from accelbench.bench.recording.session import open_recorder
    from accelbench.workloads.scale.runner import summary_outcome

    study = workload.build(options)
    base, run = study.base, workload.run
    check_emit(out.json_out, out.csv_out, out.output)
    recorder = open_recorder(out.db, base.device)
    title = f"{base.model.name} {study.mode} scaling over {list(study.devices)} device(s)"
    lines = cell_lines("scale")
    records = recorded(lambda sink, step, cell, skip: run(study, sink, None, cell, skip),
                       recorder, sweep_view(base, out.quiet, lines and lines.update), title,
                       rerun=out.rerun, remeasure_peak=out.remeasure_peak)
    if lines is not None:
        lines.close()
    if recorder is None:
        return
    cells = [r for r in records if carries(r.kind, TrainMetrics)]
    summary = stored_summary(recorder, summary_outcome(study, cells))
    tables = table_console((out.json_out or out.csv_out) and out.output is None, out.wide)
    tables.print(train_table(cells, f"{base.model.name}: cells"))
    tables.print(scale_table(summary.typed.rows, f"{base.model.name}: {study.mode} scaling"))
    console.print(Text(summary.reason))
    emit([*records, summary], out.json_out, out.csv_out, out.output)
    recorder.close()  # raises, naming the file, if a record could not be stored
