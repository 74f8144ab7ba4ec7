"""A sweep's process group across nodes: where each rank runs, and a lost node named.

Under a multi-node torchrun (or srun) no accelbench launcher watches the ranks: when a node
dies, the survivors' next collective fails. Rank 0 then asks the group's store which ranks
stopped beating (parallel/liveness.py) and records the cell as an error naming their node
before it exits; the others exit with their own error (docs/parallel.md, "Several nodes").
"""

from __future__ import annotations

from accelbench.bench.outcome import Outcome
from accelbench.bench.train.cell import KIND
from accelbench.config.layout import Layout
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.train import TrainMetrics
from accelbench.parallel.gather import gather_rank_results
from accelbench.parallel.liveness import SILENT_AFTER_S, silent_ranks, start_beating
from accelbench.parallel.topology import (
    RankPlace,
    Topology,
    cross_node_dims,
    rank_place,
    topology_of,
)


def join_nodes(rank: int) -> Topology:
    """Every rank's node, gathered (a collective); beats start when the group spans nodes."""
    places = gather_rank_results(vars(rank_place()))
    topology = topology_of([RankPlace(p["node"], p["host"]) for p in places])
    if topology.n_nodes > 1:
        start_beating(rank)
    return topology


def ranks_on_my_node(topology: Topology, rank: int) -> int:
    """How many ranks share this rank's node (and, on a CPU, its memory)."""
    return len(topology.ranks_on(topology.node_of_rank[rank]))


def topology_metrics(layout: Layout, topology: Topology) -> TrainMetrics:
    """The topology fields of a record."""
    return TrainMetrics(n_nodes=topology.n_nodes, ranks_per_node=topology.ranks_per_node(),
                        collectives_cross_node=cross_node_dims(layout, topology))


def lost_node_outcome(topology: Topology, layout: Layout, record_spec: dict,
                      err: BaseException) -> Outcome | None:
    """Rank 0 after a failed collective: an error naming the nodes all of whose ranks stopped
    beating (None when none did: the failure is not a lost node). Rank 0's node is never
    lost: rank 0 asks."""
    silent = set(silent_ranks(len(topology.node_of_rank)))
    nodes = sorted(n for n in set(topology.node_of_rank)  # every rank of the node silent
                   if set(topology.ranks_on(n)) <= silent)
    if not nodes:
        return None
    lines = str(err).strip().splitlines() or [""]
    reason = (f"lost {'; '.join(topology.describe(n) for n in nodes)}: no beat from its ranks "
              f"for {SILENT_AFTER_S:g} s; rank 0 saw {type(err).__name__}: {lines[0][:300]}")
    return Outcome(KIND, "error", record_spec, metrics_dict(topology_metrics(layout, topology)),
                   reason=reason)
