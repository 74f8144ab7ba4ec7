"""The options of `accelbench sbatch`, declared once (config/option_fields.py `option`), and their
checks: Slurm's words and time, the ranks a node against the command's --nproc, the command's
--layout against the allocation. No torch: the command starts without it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from accelbench.config.errors import ConfigError, require_count, require_positive
from accelbench.config.layout_parse import RUNTIME_KEYS, parse_layout
from accelbench.config.layout_rules import validate_layout
from accelbench.config.model import ModelConfig
from accelbench.config.option_fields import REQUIRED, argument, option
from accelbench.config.presets import resolve_model
from accelbench.config.trial_count import parse_trials
from accelbench.config.units import MAX_STEPS, parse_choice_list, parse_int_list
from accelbench.config.vocab import RECOMPUTE_KINDS, TRAIN_DTYPES

# The commands that run as one process group under torchrun (rank 0 records); the others would
# run once per rank.
GROUP_COMMANDS = ("train", "genslm")
# Slurm's --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]].
_SLURM_TIME = re.compile(r"(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2}|unlimited|infinite)",
                         re.IGNORECASE)


@dataclass(frozen=True)
class SbatchOptions:
    """What `accelbench sbatch` is asked: the command, the allocation, Slurm's settings."""

    command: list[str] = argument(REQUIRED, "The accelbench command to run, after --, e.g. -- "
                                  "train --model gpt2-medium --layout dp=8,tp=4")
    nodes: int = option(REQUIRED, "Number of nodes.")
    gpus_per_node: int = option(8, "GPUs a node (0: CPU nodes, no GPU asked for).",
                                "--gpus-per-node")
    nproc_per_node: int | None = option(None, "Ranks a node (default: one a GPU; on CPU nodes "
                                        "the command's --nproc over --nodes, else 1).",
                                        "--nproc-per-node")
    cpus_per_task: int | None = option(None, "CPUs of each node's task, shared by its ranks "
                                       "(default: one a rank).", "--cpus-per-task")
    log_dir: Path = option(Path("accelbench-logs"), "Folder of the job's output and error files "
                           "(made now: Slurm does not).", "--log-dir")
    job_name: str = option("accelbench", "Slurm job name.")
    time_limit: str = option("01:00:00", "Slurm time limit.", "--time")
    partition: str | None = option(None, "Slurm partition.")
    account: str | None = option(None, "Slurm account.")
    port: int = option(29500, "Rendezvous port on the first node.")


# The largest allocation a script asks for: more nodes than any machine has (Fugaku's 158,976
# are the most), and more GPUs, ranks or CPUs on one node than any node has.
MAX_NODES = 200_000
MAX_PER_NODE = 1024

# Slurm names (job name, account, each partition of a list): letters, digits and . _ + -, so a
# name is one word on an #SBATCH line and one file name in the %x of --output.
_SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
_NAME_ALLOWED = "letters, digits and . _ + - (up to 128, starting with a letter or digit)"
# A path on an #SBATCH line: Slurm reads '%' as a file-name pattern, a backslash as "expand none"
_PATH_ALLOWED = "a path without control characters, '%', '\\', 'packjob' or 'hetjob'"


def _check_name(field: str, value: str | None, many: bool = False) -> None:
    """A Slurm name (a comma list of them where `many`: partitions), refused otherwise."""
    if value is None:
        return
    names = value.split(",") if many else [value]
    if not all(_SLURM_NAME.fullmatch(name) for name in names):
        raise ConfigError(field, f"{value!r} is not a Slurm name",
                          _NAME_ALLOWED + (", comma-separated" if many else ""))


def control_free(field: str, text: str) -> str:
    """Text with no control character (a newline would end an #SBATCH line or the command)."""
    bad = next((ch for ch in text if not ch.isprintable()), None)
    if bad is not None:
        raise ConfigError(field, f"{text!r} holds the control character {bad!r}",
                          "text without control characters (newline, tab, escape, ...)")
    return text


def check_sbatch_path(field: str, path: str) -> str:
    """A path written on an #SBATCH line: no control characters, no '%' or backslash, and not
    'packjob' or 'hetjob' (sbatch blanks those words out of an #SBATCH line: a new job part)."""
    control_free(field, path)
    if "%" in path or "\\" in path:
        raise ConfigError(field, f"{path!r} holds '%' or '\\', which Slurm reads in file names",
                          _PATH_ALLOWED)
    if any(word in path.lower() for word in ("packjob", "hetjob")):
        raise ConfigError(field, f"{path!r} holds 'packjob' or 'hetjob', which sbatch reads as "
                          "the start of another job part", _PATH_ALLOWED)
    return path


def check_sbatch(given: SbatchOptions) -> None:
    """The allocation's sizes, the port, Slurm's time and names (ConfigError naming the
    option, before the command is read)."""
    require_positive("nodes", given.nodes)
    require_count("nodes", given.nodes, MAX_NODES)
    if given.gpus_per_node < 0:
        raise ConfigError("gpus-per-node", f"must be 0 or more, got {given.gpus_per_node}",
                          "0 (CPU nodes) or a positive number")
    require_count("gpus-per-node", given.gpus_per_node, MAX_PER_NODE, minimum=0)
    for field, value in (("nproc-per-node", given.nproc_per_node),
                         ("cpus-per-task", given.cpus_per_task)):
        if value is not None:
            require_positive(field, value)
            require_count(field, value, MAX_PER_NODE)
    if not 1 <= given.port <= 65535:
        raise ConfigError("port", f"must be a TCP port, got {given.port}", "1 to 65535")
    if not _SLURM_TIME.fullmatch(given.time_limit):
        raise ConfigError("time", f"cannot read Slurm time {given.time_limit!r}",
                          "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED")
    _check_name("job-name", given.job_name)
    _check_name("partition", given.partition, many=True)
    _check_name("account", given.account)
    check_sbatch_path("log-dir", str(given.log_dir))


def check_group_command(name: str) -> None:
    """A command that runs as one process group under torchrun."""
    if name not in GROUP_COMMANDS:
        raise ConfigError("command", f"{name!r} does not run as a process group under torchrun",
                          ", ".join(GROUP_COMMANDS))


def option_value(args: list[str], name: str) -> tuple[str | None, list[str]]:
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


def _command_model(params: dict) -> ModelConfig | None:
    """The command's preset model (ConfigError for an unknown one), None for a model read
    from a file (hf:, hf-config:, neox:), which is checked where the file is, on the
    allocation."""
    if str(params["model"]).startswith(("hf:", "hf-config:", "neox:")):
        return None
    return resolve_model(params["model"])


def check_command(params: dict, world_size: int) -> None:
    """The command's model, sweep lists and layout (its --layout, else data parallel over
    the allocation) against the allocation's ranks, before the script is written: what
    would fail on the cluster fails here (the rest of the command's checks need torch)."""
    if not params:  # the command's --help: nothing to check
        return
    model = _command_model(params)
    seqs = parse_int_list("seq", params["seq"])
    parse_int_list("micro-batch", params["micro_batch"])
    parse_choice_list("dtype", params["dtype"], TRAIN_DTYPES)
    parse_choice_list("recompute", params["recompute"], RECOMPUTE_KINDS)
    parse_trials(params["trials"])
    require_count("steps", params["steps"], MAX_STEPS)
    if model is None:
        return
    layout = parse_layout(params.get("layout") or f"dp={world_size}", RUNTIME_KEYS)
    for gas in parse_int_list("gas", params["gas"]):
        for seq in seqs:
            if model.position == "learned" and seq > model.n_positions:
                raise ConfigError("seq", f"{seq} is longer than the model's "
                                  f"{model.n_positions} positions", f"<= {model.n_positions}")
            validate_layout(layout, model, world_size, gas, seq)


def check_arguments(args: list[str]) -> list[str]:
    """The command's arguments, none holding a control character (each is quoted for the
    shell in the script; a newline would still split a log line or a value)."""
    for arg in args:
        control_free("command", arg)
    return args


def can_be_made(field: str, path: Path) -> Path:
    """A file path whose folder exists or can be made (no file in the way, writable where
    the first existing folder is): a results database the job will write."""
    control_free(field, str(path))
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(field, f"{path} cannot be written: {folder} is not a folder this "
                          "user can write in", "a path whose folder exists or can be made")
    return path


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


def absolute(path: str | Path) -> str:
    """An absolute path (the job runs later, maybe in another folder)."""
    return str(Path(path).expanduser().absolute())


def make_log_dir(log_dir: Path) -> Path:
    """The log folder, absolute, made before the job is submitted (Slurm opens the files
    first)."""
    logs = Path(check_sbatch_path("log-dir", absolute(log_dir)))
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError("log-dir", f"{logs} cannot be made: {err.strerror}",
                          "a folder you can write") from None
    return logs
