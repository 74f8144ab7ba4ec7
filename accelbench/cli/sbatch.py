"""`accelbench sbatch`: print a multi-node Slurm script that runs an accelbench command.
Options and checks from parallel/sbatch_options.py; here the command's own options are parsed
by its parser (the one thing only the command line knows)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from accelbench.cli.options import dataclass_command
from accelbench.config.paths import default_db_path
from accelbench.parallel.sbatch_options import (
    SbatchOptions,
    absolute,
    can_be_made,
    check_arguments,
    check_command,
    check_group_command,
    check_sbatch,
    check_sbatch_path,
    make_log_dir,
    option_value,
    ranks_per_node,
)


def _parsed(ctx: typer.Context, name: str, args: list[str]) -> dict:
    """The command's options as it would parse them (names, types: exit 2 on a bad one)."""
    check_group_command(name)
    root = ctx.find_root()
    target = root.command.get_command(root, name)  # type: ignore[attr-defined]
    if target is None or "--help" in args:
        return {}
    return target.make_context(name, list(args), parent=root).params


def _command_args(ctx: typer.Context, options: SbatchOptions) -> tuple[list[str], int]:
    """The command's arguments as the job runs them (no --nproc: the script starts the ranks;
    --db absolute, the default one when none is given), and the ranks a node."""
    name, args = options.command[0], check_arguments(options.command[1:])
    nproc_text, args = option_value(args, "--nproc")
    db, args = option_value(args, "--db")
    params = _parsed(ctx, name, args + (["--nproc", nproc_text] if nproc_text else []))
    nproc = params.get("nproc") if nproc_text else None
    per_node = ranks_per_node(options.nodes, options.gpus_per_node, options.nproc_per_node,
                              nproc)
    check_command(params, options.nodes * per_node)
    db_path = can_be_made("db", Path(absolute(db or default_db_path())))
    return [name, *args, "--db", str(db_path)], per_node


def sbatch(options: SbatchOptions, ctx: typer.Context) -> None:
    """Write the sbatch script (srun + torchrun c10d rendezvous) to stdout."""
    # imported here, not at the top: the other commands start without them
    from accelbench.parallel.slurm import SlurmJob, sbatch_script
    from accelbench.parallel.torchrun_launch import ACCELBENCH_MODULE

    check_sbatch(options)
    workdir = check_sbatch_path("chdir", absolute(Path.cwd()))
    args, per_node = _command_args(ctx, options)
    logs = make_log_dir(options.log_dir)
    job = SlurmJob(options.nodes, per_node, ACCELBENCH_MODULE + args, options.gpus_per_node,
                   options.cpus_per_task or per_node, sys.executable, workdir,
                   str(logs), options.job_name, options.time_limit, options.partition,
                   options.account, options.port)
    print(sbatch_script(job), end="")


def register(app: typer.Typer) -> None:
    """Add the sbatch command."""
    app.command("sbatch", context_settings={"allow_interspersed_args": False})(
        dataclass_command(sbatch, SbatchOptions, help=sbatch.__doc__ or "", name="sbatch",
                          context=True))
