"""`accelbench sbatch`: print a multi-node Slurm script that runs an accelbench command."""

from __future__ import annotations

import typer

from accelbench.config.errors import require_positive
from accelbench.parallel.launch import ACCELBENCH_MODULE, sbatch_script


def sbatch(
    command: list[str] = typer.Argument(..., help="The accelbench command to run, after --, "
                                        "e.g. -- train --model gpt2-xl --layout dp=8,tp=4"),
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
    print(sbatch_script(nodes, gpus_per_node, ACCELBENCH_MODULE + list(command), job_name,
                        time_limit, partition, account, port), end="")


def register(app: typer.Typer) -> None:
    """Add the sbatch command."""
    app.command("sbatch", context_settings={"allow_interspersed_args": False})(sbatch)
