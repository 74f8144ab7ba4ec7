"""`accelbench sbatch`: print a multi-node Slurm script that runs an accelbench command."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import typer

from accelbench.config.errors import ConfigError, require_positive
from accelbench.config.layout import RUNTIME_KEYS, parse_layout, validate_layout
from accelbench.config.paths import default_db_path
from accelbench.config.presets import resolve_model
from accelbench.config.units import parse_int_list

# The commands that run as one process group under torchrun (rank 0 records); the others would
# run once per rank.
GROUP_COMMANDS = ("train", "genslm")
# Slurm's --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]].
_SLURM_TIME = re.compile(r"(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2}|unlimited|infinite)",
                         re.IGNORECASE)


def _check_word(field: str, value: str | None) -> None:
    """A Slurm name (job name, partition, account): non-empty, one word, printable."""
    if value is not None and (not value or not value.isprintable() or value.split() != [value]):
        raise ConfigError(field, f"{value!r} is not one word", "a non-empty name without spaces")


def _option(args: list[str], name: str) -> tuple[str | None, list[str]]:
    """The value of `--name V` or `--name=V` in args (the last one given), and args without it."""
    value, rest, i = None, [], 0
    while i < len(args):
        if args[i] == name and i + 1 < len(args):
            value, i = args[i + 1], i + 2
        elif args[i].startswith(name + "="):
            value, i = args[i].split("=", 1)[1], i + 1
        else:
            rest.append(args[i])
            i += 1
    return value, rest


def _parsed(ctx: typer.Context, name: str, args: list[str]) -> dict:
    """The command's options as it would parse them (names, types: exit 2 on a bad one)."""
    if name not in GROUP_COMMANDS:
        raise ConfigError("command", f"{name!r} does not run as a process group under torchrun",
                          ", ".join(GROUP_COMMANDS))
    root = ctx.find_root()
    target = root.command.get_command(root, name)  # type: ignore[attr-defined]
    if target is None or "--help" in args:
        return {}
    return target.make_context(name, list(args), parent=root).params


def _check_layout(params: dict, world_size: int) -> None:
    """The command's --layout against the allocation's ranks and its preset model (a model
    read from a file is checked where the file is, on the allocation)."""
    if not params.get("layout") or str(params["model"]).startswith(("hf:", "hf-config:",
                                                                    "neox:")):
        return
    layout = parse_layout(params["layout"], RUNTIME_KEYS)
    model = resolve_model(params["model"])
    for gas in parse_int_list("gas", params["gas"]):
        for seq in parse_int_list("seq", params["seq"]):
            validate_layout(layout, model, world_size, gas, seq)


def ranks_per_node(nodes: int, gpus_per_node: int, nproc_per_node: int | None,
                   nproc: int | None) -> int:
    """torchrun's --nproc-per-node: given, or one rank a GPU, or the command's --nproc split
    over the nodes (one a node on CPU nodes); refused where these contradict each other."""
    if nproc is not None and not (nproc_per_node or gpus_per_node) and nproc % nodes:
        raise ConfigError("nproc", f"{nproc} ranks do not split evenly over --nodes {nodes}",
                          f"a multiple of {nodes}")
    per_node = nproc_per_node or gpus_per_node or (nproc // nodes if nproc else 1)
    if gpus_per_node and per_node != gpus_per_node:
        raise ConfigError("nproc-per-node", f"{per_node} ranks on {gpus_per_node} GPUs a node "
                          "(each rank takes one GPU)", f"{gpus_per_node}, or --gpus-per-node "
                          f"{per_node}")
    if nproc is not None and nproc != nodes * per_node:
        raise ConfigError("nproc", f"{nproc} ranks, but --nodes {nodes} x {per_node} ranks a "
                          f"node = {nodes * per_node}", f"{nodes * per_node}, or leave it out")
    return per_node


def _absolute(path: str | Path) -> str:
    """An absolute path (the job runs later, maybe in another folder)."""
    return str(Path(path).expanduser().absolute())


def _command_args(ctx: typer.Context, command: list[str], nodes: int, gpus_per_node: int,
                  nproc_per_node: int | None) -> tuple[list[str], int]:
    """The command's arguments as the job runs them (no --nproc: the script starts the ranks;
    --db absolute, the default one when none is given), and the ranks a node."""
    name, args = command[0], command[1:]
    nproc_text, args = _option(args, "--nproc")
    db, args = _option(args, "--db")
    params = _parsed(ctx, name, args + (["--nproc", nproc_text] if nproc_text else []))
    nproc = params.get("nproc") if nproc_text else None
    per_node = ranks_per_node(nodes, gpus_per_node, nproc_per_node, nproc)
    _check_layout(params, nodes * per_node)
    return [name, *args, "--db", _absolute(db or default_db_path())], per_node


def sbatch(
    ctx: typer.Context,
    command: list[str] = typer.Argument(..., help="The accelbench command to run, after --, "
                                        "e.g. -- train --model gpt2-medium --layout dp=8,tp=4"),
    nodes: int = typer.Option(..., help="Number of nodes."),
    gpus_per_node: int = typer.Option(8, "--gpus-per-node", help="GPUs a node (0: CPU nodes, "
                                      "no GPU asked for)."),
    nproc_per_node: int = typer.Option(None, "--nproc-per-node", help="Ranks a node (default: "
                                       "one a GPU; on CPU nodes the command's --nproc over "
                                       "--nodes, else 1)."),
    cpus_per_task: int = typer.Option(None, "--cpus-per-task", help="CPUs of each node's task, "
                                      "shared by its ranks (default: one a rank)."),
    log_dir: Path = typer.Option(Path("accelbench-logs"), "--log-dir", help="Folder of the "
                                 "job's output and error files (made now: Slurm does not)."),
    job_name: str = typer.Option("accelbench", help="Slurm job name."),
    time_limit: str = typer.Option("01:00:00", "--time", help="Slurm time limit."),
    partition: str = typer.Option(None, help="Slurm partition."),
    account: str = typer.Option(None, help="Slurm account."),
    port: int = typer.Option(29500, help="Rendezvous port on the first node."),
) -> None:
    """Write the sbatch script (srun + torchrun c10d rendezvous) to stdout."""
    # imported here, not at the top: the other commands start without them
    from accelbench.parallel.launch import ACCELBENCH_MODULE
    from accelbench.parallel.slurm import SlurmJob, sbatch_script

    require_positive("nodes", nodes)
    if gpus_per_node < 0:
        raise ConfigError("gpus-per-node", f"must be 0 or more, got {gpus_per_node}",
                          "0 (CPU nodes) or a positive number")
    for field, value in (("nproc-per-node", nproc_per_node), ("cpus-per-task", cpus_per_task)):
        if value is not None:
            require_positive(field, value)
    if not 1 <= port <= 65535:
        raise ConfigError("port", f"must be a TCP port, got {port}", "1 to 65535")
    if not _SLURM_TIME.fullmatch(time_limit):
        raise ConfigError("time", f"cannot read Slurm time {time_limit!r}",
                          "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED")
    for field, value in (("job-name", job_name), ("partition", partition),
                         ("account", account)):
        _check_word(field, value)
    args, per_node = _command_args(ctx, command, nodes, gpus_per_node, nproc_per_node)
    logs = Path(_absolute(log_dir))
    _make_log_dir(logs)
    job = SlurmJob(nodes, per_node, ACCELBENCH_MODULE + args, gpus_per_node,
                   cpus_per_task or per_node, sys.executable, _absolute(Path.cwd()), str(logs),
                   job_name, time_limit, partition, account, port)
    print(sbatch_script(job), end="")


def _make_log_dir(logs: Path) -> None:
    """The log folder, made before the job is submitted (Slurm opens the files first)."""
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError("log-dir", f"{logs} cannot be made: {err.strerror}",
                          "a folder you can write") from None


def register(app: typer.Typer) -> None:
    """Add the sbatch command."""
    app.command("sbatch", context_settings={"allow_interspersed_args": False})(sbatch)
