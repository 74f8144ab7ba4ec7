"""`accelbench calibrate`'s body: measure this machine's micro-benchmarks into a stored
profile (or, with --from-block, refine the newest profile with the block records)."""

from __future__ import annotations

import typer
from rich.text import Text

from accelbench.cli.common import check_emit, console, emit, progress_bar, table_console
from accelbench.cli.options import Outputs
from accelbench.config.workload import Workload
from accelbench.store.record import Record
from accelbench.workloads.calibrate.options import CalibrateOptions


def run_calibrate(workload: Workload, options: CalibrateOptions, out: Outputs) -> None:
    """Time GEMMs, fused attention, memory, the loss, embedding, optimizer and collectives;
    store the profile (an interrupted run keeps the points measured, status interrupted)."""
    if options.from_block:
        _from_block(options, out)
        return
    from accelbench.bench.recording.recorder import Recorder
    from accelbench.hardware.detect import resolve_device
    from accelbench.hardware.environment import environment
    from accelbench.store.store import ResultStore
    from accelbench.workloads.calibrate.run import CalibrationInterrupted

    target = resolve_device(options.device)
    spec = workload.build(options)
    check_emit(out.json_out, False, None)
    recorder = Recorder(ResultStore(out.db), environment(target))
    console.print(Text(f"calibrate {','.join(spec.ops)} on {target} "
                       f"({recorder.environment['device_name']}); results -> "
                       f"{recorder.store.path}"))
    try:
        with progress_bar("calibrate") as progress:
            record = recorder(workload.run(spec, target, progress))
    except CalibrationInterrupted as stop:
        kept = recorder(stop.outcome)
        console.print(Text(f"{stop.outcome.reason}; the points measured before are kept as "
                           f"record {kept.id} (status interrupted)"))
        recorder.close()
        raise typer.Exit(stop.exit_code) from None
    _show(record, out)
    recorder.close()


def _from_block(options: CalibrateOptions, out: Outputs) -> None:
    """Store the newest profile refined with the store's block records, and print it."""
    from accelbench.bench.recording.recorder import Recorder
    from accelbench.report.stored_profile import profile_with_blocks
    from accelbench.store.store import ResultStore

    check_emit(out.json_out, False, None)
    store = ResultStore(out.db)
    outcome, env = profile_with_blocks(store, options.threads)
    recorder = Recorder(store, env)
    _show(recorder(outcome), out)
    recorder.close()


def _show(record: Record, out: Outputs) -> None:
    """The record's note, the profile's table and any JSON."""
    from accelbench.report.stored_profile import profile_table

    if record.reason:
        console.print(Text(f"note: {record.reason}"))
    table_console(out.json_out, out.wide).print(profile_table(record))
    emit([record], out.json_out, False)
