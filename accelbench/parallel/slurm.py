"""Slurm batch scripts that run an accelbench command as one torchrun group over many nodes.

One srun task per node, each a torchrun agent with `nproc_per_node` ranks; the agents meet at
the first node of the allocation through the c10d rendezvous. The script names everything it
needs by absolute path (the Python of the environment it was written from, the working folder,
the log files, the results database), since it runs later, elsewhere, in a fresh shell.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SlurmJob:
    """What one sbatch script asks of Slurm and runs; gpus_per_node 0 asks for CPU nodes."""

    nodes: int
    nproc_per_node: int
    command: list[str]  # what follows `python`: ["-m", "accelbench", "train", ...]
    gpus_per_node: int = 0
    cpus_per_task: int = 1  # the one task of a node: its torchrun agent and every rank
    python: str = sys.executable
    workdir: str | None = None
    log_dir: str | None = None  # %x-%j.out and .err there (Slurm does not create it)
    job_name: str = "accelbench"
    time_limit: str = "01:00:00"
    partition: str | None = None
    account: str | None = None
    port: int = 29500
    extra_sbatch: list[str] = field(default_factory=list)


_SLURM_SPECIAL = "\"'\\#"  # what sbatch's #SBATCH parser reads as more than a character


def slurm_quote(value: object) -> str:
    """A value as sbatch reads it back from an #SBATCH line (src/sbatch/opt.c _get_argument:
    quotes group, a backslash escapes the next character, an unquoted '#' starts a comment,
    a newline ends the line): double-quoted, backslashes and double quotes escaped. A value
    holding a control character is refused: no quoting carries a newline past the line's end.
    A value of plain characters is written as it is."""
    text = str(value)
    if any(not ch.isprintable() for ch in text):
        raise ValueError(f"{text!r}: a control character cannot be written on an #SBATCH line")
    if text and not any(ch in _SLURM_SPECIAL or ch.isspace() for ch in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _directives(job: SlurmJob) -> list[str]:
    """The #SBATCH lines, each value quoted for sbatch's parser (bash reads them as comments)."""
    items: list[tuple[str, object]] = [
        ("job-name", job.job_name), ("nodes", job.nodes), ("ntasks-per-node", 1),
        ("cpus-per-task", job.cpus_per_task)]
    if job.gpus_per_node:
        items.append(("gpus-per-node", job.gpus_per_node))
    items.append(("time", job.time_limit))
    for name, value in (("partition", job.partition), ("account", job.account),
                        ("chdir", job.workdir)):
        if value:
            items.append((name, value))
    if job.log_dir:
        items += [("output", f"{job.log_dir}/%x-%j.out"), ("error", f"{job.log_dir}/%x-%j.err")]
    lines = [f"#SBATCH --{name}={slurm_quote(value)}" for name, value in items]
    return lines + [f"#SBATCH {slurm_quote(extra)}" for extra in job.extra_sbatch]


def sbatch_script(job: SlurmJob) -> str:
    """The batch script: srun starts one torchrun agent per node (srun does not inherit
    --cpus-per-task from sbatch since Slurm 22.05, so it is passed again)."""
    lines = ["#!/bin/bash", *_directives(job), "set -euo pipefail",
             'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
             f"export MASTER_ADDR=$head_node MASTER_PORT={int(job.port)}",
             "srun --kill-on-bad-exit=1 --ntasks-per-node=1 --cpus-per-task=$SLURM_CPUS_PER_TASK"
             " \\",
             f"    {shlex.quote(job.python)} -m torch.distributed.run \\",
             f"    --nnodes={int(job.nodes)} --nproc-per-node={int(job.nproc_per_node)} \\",
             "    --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT \\",
             "    --rdzv-id=$SLURM_JOB_ID \\",
             f"    {shlex.join(job.command)}"]
    return "\n".join(lines) + "\n"
