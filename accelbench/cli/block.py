"""`accelbench block`: the transformer-block micro-benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from accelbench.cli.common import check_emit, console, emit, progress_bar, table_console
from accelbench.cli.options import RERUN_HELP
from accelbench.cli.train import recorded

if TYPE_CHECKING:  # the benchmark imports torch: loaded when the command runs, not for --help
    from accelbench.bench.block import BlockSpec


def _note(text: str) -> None:
    """A line about the sweep (a skipped cell, the resume summary) on stderr, as text."""
    console.print(Text(text), highlight=False)


def _run(spec: BlockSpec, db: Path | None, as_json: bool, as_csv: bool,
         output: Path | None, rerun: bool = False, wide: bool = False) -> None:
    """Sweep through the one run-and-record session (results.session, as train and a study's
    block sweeps), storing each cell as it lands, then print the table (and JSON/CSV if asked):
    the banner and progress on stderr, the table on stdout (on stderr when JSON/CSV goes
    there). Cells finished on this machine before are skipped and shown from the store, unless
    rerun; SIGINT/SIGTERM prints what was kept in one line and exits 130/143."""
    from accelbench.bench.block import run_block_sweep
    from accelbench.bench.recording.recorder import Recorder
    from accelbench.bench.recording.session import SweepView
    from accelbench.hardware.detect import resolve_device
    from accelbench.hardware.environment import environment
    from accelbench.report.table import block_table
    from accelbench.store.store import ResultStore

    spec.validate()
    check_emit(as_json, as_csv, output)
    device = resolve_device(spec.device)
    recorder = Recorder(ResultStore(db), environment(device))
    title = f"{spec.model.name} block, seq {spec.seq_len}"

    def sweep(sink, step, cell, skip):  # the bar ends before a line about an interruption
        def shown(i: int, total: int, label: str) -> None:
            cell(i, total, label)
            progress(i, total, label)

        with progress_bar("block") as progress:
            return run_block_sweep(spec, sink, shown, skip)

    view = SweepView(banner=lambda text: console.print(Text(text, style="bold")),
                     cell=lambda i, total, label: None, step=None,
                     failed=lambda record: None, note=_note)
    records = recorded(sweep, recorder, view, title, rerun=rerun)
    cells = [r for r in records if r.kind == "block"]  # peaks: in the caption
    table_console((as_json or as_csv) and output is None, wide).print(block_table(cells, title))
    emit(records, as_json, as_csv, output)
    recorder.close()  # raises, naming the file, if a record could not be stored


def block(
    model: str = typer.Option("gpt2-xl", help="Preset, preset:overrides or custom:layers=..."),
    seq: int = typer.Option(1024, help="Sequence length."),
    batch: str = typer.Option("8,16,32,64", help="Comma-separated batch sizes."),
    dtype: str = typer.Option("fp32,fp16,bf16", help="Comma-separated: fp32, fp16, bf16."),
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N, xpu, mps."),
    repeats: int = typer.Option(10, help="Timed repetitions per trial."),
    warmup: int = typer.Option(3, help="Untimed warm-up repetitions per trial."),
    trials: str = typer.Option("auto", help="Independent trials per cell (each its own warm-up "
                               "and timed repetitions), interleaved across the cells: the "
                               "figure is their median, with a 95% interval from 6 trials; "
                               "auto: 6 on an accelerator, 3 on a CPU."),
    disturbance_threshold: float = typer.Option(0.10, help="Share of the CPU capacity other "
                                                "processes may use in a timed window before "
                                                "the cell is flagged disturbed, in (0, 1]."),
    compile: bool = typer.Option(False, "--compile/--no-compile", help="torch.compile the block."),
    tf32: bool = typer.Option(False, "--tf32/--no-tf32", help="Allow TF32 for fp32 matmuls."),
    mem_limit: str = typer.Option("", help="Refuse cells estimated above this, e.g. 8GiB."),
    db: Path = typer.Option(None, help="SQLite results file (default: $ACCELBENCH_DB or XDG)."),
    json_out: bool = typer.Option(False, "--json", help="Print the records as JSON."),
    csv_out: bool = typer.Option(False, "--csv", help="Print the records as CSV."),
    output: Path = typer.Option(None, help="Write JSON/CSV here instead of stdout."),
    rerun: bool = typer.Option(False, "--rerun", help=RERUN_HELP),
    wide: bool = typer.Option(False, "--wide", help="Every column of the table, wider than the "
                              "terminal if need be."),
) -> None:
    """Time one transformer block's forward and backward over batch x dtype (study figs 3-4)."""
    from accelbench.bench.block import BlockOptions, build_block_spec

    spec = build_block_spec(BlockOptions(
        model=model, seq=seq, batch=batch, dtype=dtype, device=device, repeats=repeats,
        warmup=warmup, trials=trials, disturbance_threshold=disturbance_threshold,
        compile=compile, tf32=tf32, mem_limit=mem_limit))
    _run(spec, db, json_out, csv_out, output, rerun, wide)


def register(app: typer.Typer) -> None:
    """Add the block command."""
    app.command("block")(block)
