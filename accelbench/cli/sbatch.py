"""`accelbench sbatch`: print a multi-node Slurm script that runs an accelbench command."""

from __future__ import annotations

import re

import typer

from accelbench.config.errors import ConfigError, require_positive
from accelbench.config.layout import RUNTIME_KEYS, parse_layout, validate_layout
from accelbench.config.presets import resolve_model
from accelbench.config.units import parse_int_list
from accelbench.parallel.launch import ACCELBENCH_MODULE, sbatch_script

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


def _check_command(ctx: typer.Context, command: list[str], world_size: int) -> None:
    """The command is one that runs under torchrun, its options parse (names, types) and its
    --layout divides the allocation; the other values are checked where it runs."""
    name, args = command[0], command[1:]
    if name not in GROUP_COMMANDS:
        raise ConfigError("command", f"{name!r} does not run as a process group under torchrun",
                          ", ".join(GROUP_COMMANDS))
    root = ctx.find_root()
    target = root.command.get_command(root, name)  # type: ignore[attr-defined]
    if target is None or "--help" in args:
        return
    params = target.make_context(name, list(args), parent=root).params
    if params.get("layout") and not str(params["model"]).startswith(("hf:", "hf-config:", "neox:")):
        _check_layout(params, world_size)


def _check_layout(params: dict, world_size: int) -> None:
    """The command's --layout against the allocation's ranks and its preset model (a model
    read from a file is checked where the file is, on the allocation)."""
    layout = parse_layout(params["layout"], RUNTIME_KEYS)
    model = resolve_model(params["model"])
    for gas in parse_int_list("gas", params["gas"]):
        for seq in parse_int_list("seq", params["seq"]):
            validate_layout(layout, model, world_size, gas, seq)


def sbatch(
    ctx: typer.Context,
    command: list[str] = typer.Argument(..., help="The accelbench command to run, after --, "
                                        "e.g. -- train --model gpt2-medium --layout dp=8,tp=4"),
    nodes: int = typer.Option(..., help="Number of nodes."),
    gpus_per_node: int = typer.Option(8, "--gpus-per-node", help="Ranks (GPUs) per node."),
    job_name: str = typer.Option("accelbench", help="Slurm job name."),
    time_limit: str = typer.Option("01:00:00", "--time", help="Slurm time limit."),
    partition: str = typer.Option(None, help="Slurm partition."),
    account: str = typer.Option(None, help="Slurm account."),
    port: int = typer.Option(29500, help="Rendezvous port on the first node."),
) -> None:
    """Write the sbatch script (srun + torchrun c10d rendezvous) to stdout."""
    require_positive("nodes", nodes)
    require_positive("gpus-per-node", gpus_per_node)
    if not 1 <= port <= 65535:
        raise ConfigError("port", f"must be a TCP port, got {port}", "1 to 65535")
    if not _SLURM_TIME.fullmatch(time_limit):
        raise ConfigError("time", f"cannot read Slurm time {time_limit!r}",
                          "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED")
    for field, value in (("job-name", job_name), ("partition", partition),
                         ("account", account)):
        _check_word(field, value)
    _check_command(ctx, command, nodes * gpus_per_node)
    print(sbatch_script(nodes, gpus_per_node, ACCELBENCH_MODULE + list(command), job_name,
                        time_limit, partition, account, port), end="")


def register(app: typer.Typer) -> None:
    """Add the sbatch command."""
    app.command("sbatch", context_settings={"allow_interspersed_args": False})(sbatch)
