"""Which node each rank runs on, and which collectives of a layout cross nodes.

A rank's node comes from its launcher: torchrun sets GROUP_RANK (the agent's place in the
rendezvous, one agent a node) and LOCAL_WORLD_SIZE; srun without torchrun sets SLURM_NODEID.
The host name is kept beside it to name a node in a line, but never decides the node: two
torchrun agents on one host are two nodes (how the multi-node path is tested on one machine).

The mesh is (pp, dp, tp), row-major, as `init_device_mesh` lays it out: a dimension's
collectives cross nodes when some group along it holds ranks of two nodes.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from itertools import product

from accelbench.config.layout import MESH_DIMS, Layout


@dataclass(frozen=True)
class RankPlace:
    """Where one rank runs: its node (the launcher's node rank) and that node's host name."""

    node: int
    host: str


def rank_place(env: dict[str, str] | None = None) -> RankPlace:
    """This rank's node from torchrun's GROUP_RANK or Slurm's SLURM_NODEID (0 otherwise)."""
    env = dict(os.environ if env is None else env)
    node = env.get("GROUP_RANK") if "RANK" in env else None
    node = node if node is not None else env.get("SLURM_NODEID", "0")
    return RankPlace(int(node), socket.gethostname())


@dataclass(frozen=True)
class Topology:
    """The nodes of a group: node_of_rank[r] is global rank r's node, hosts[n] node n's host."""

    node_of_rank: tuple[int, ...]
    hosts: dict[int, str]

    @property
    def n_nodes(self) -> int:
        """Number of distinct nodes."""
        return len(set(self.node_of_rank))

    def ranks_per_node(self) -> list[int]:
        """Ranks on each node, nodes in order."""
        return [self.node_of_rank.count(n) for n in sorted(set(self.node_of_rank))]

    def ranks_on(self, node: int) -> list[int]:
        """The global ranks of one node."""
        return [r for r, n in enumerate(self.node_of_rank) if n == node]

    def describe(self, node: int) -> str:
        """'node 1 (host vm, ranks 2-3)' for a line."""
        ranks = self.ranks_on(node)
        span = f"{ranks[0]}-{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])
        return f"node {node} (host {self.hosts.get(node, '?')}, ranks {span})"


def topology_of(places: list[RankPlace]) -> Topology:
    """The topology from every rank's place, in global rank order."""
    return Topology(tuple(p.node for p in places), {p.node: p.host for p in places})


def mesh_groups(layout: Layout, dim: str) -> list[list[int]]:
    """The global ranks of every group along one mesh dimension (pp, dp or tp)."""
    shape = dict(zip(MESH_DIMS, layout.mesh_shape, strict=True))
    strides = {"pp": layout.dp * layout.tp, "dp": layout.tp, "tp": 1}
    others = [d for d in MESH_DIMS if d != dim]
    groups = []
    for fixed in product(*(range(shape[d]) for d in others)):
        base = sum(i * strides[d] for d, i in zip(others, fixed, strict=True))
        groups.append([base + k * strides[dim] for k in range(shape[dim])])
    return groups


def cross_node_dims(layout: Layout, topology: Topology) -> list[str]:
    """The mesh dimensions (pp, dp, tp) whose collectives cross nodes, outermost first."""
    nodes = topology.node_of_rank
    return [dim for dim in MESH_DIMS if layout.mesh_shape[MESH_DIMS.index(dim)] > 1
            and any(len({nodes[r] for r in group}) > 1 for group in mesh_groups(layout, dim))]
