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


def _directives(job: SlurmJob) -> list[str]:
    """The #SBATCH lines."""
    items = [f"--job-name={job.job_name}", f"--nodes={job.nodes}", "--ntasks-per-node=1",
             f"--cpus-per-task={job.cpus_per_task}"]
    if job.gpus_per_node:
        items.append(f"--gpus-per-node={job.gpus_per_node}")
    items.append(f"--time={job.time_limit}")
    for name, value in (("partition", job.partition), ("account", job.account),
                        ("chdir", job.workdir)):
        if value:
            items.append(f"--{name}={value}")
    if job.log_dir:
        items += [f"--output={job.log_dir}/%x-%j.out", f"--error={job.log_dir}/%x-%j.err"]
    return [f"#SBATCH {item}" for item in items + list(job.extra_sbatch)]


def sbatch_script(job: SlurmJob) -> str:
    """The batch script: srun starts one torchrun agent per node (srun does not inherit
    --cpus-per-task from sbatch since Slurm 22.05, so it is passed again)."""
    lines = ["#!/bin/bash", *_directives(job), "set -euo pipefail",
             'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
             f"export MASTER_ADDR=$head_node MASTER_PORT={job.port}",
             "srun --kill-on-bad-exit=1 --ntasks-per-node=1 --cpus-per-task=$SLURM_CPUS_PER_TASK"
             " \\",
             f"    {shlex.quote(job.python)} -m torch.distributed.run \\",
             f"    --nnodes={job.nodes} --nproc-per-node={job.nproc_per_node} \\",
             "    --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT \\",
             "    --rdzv-id=$SLURM_JOB_ID \\",
             f"    {shlex.join(job.command)}"]
    return "\n".join(lines) + "\n"
