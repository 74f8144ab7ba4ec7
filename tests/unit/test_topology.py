"""Nodes from the launcher's variables, and which mesh dimensions cross nodes."""

from accelbench.config.layout import Layout
from accelbench.parallel.topology import (
    RankPlace,
    cross_node_dims,
    mesh_groups,
    rank_place,
    topology_of,
)


def _nodes(*nodes: int):
    return topology_of([RankPlace(n, f"h{n}") for n in nodes])


def test_node_rank_from_torchrun_or_slurm():
    assert rank_place({"RANK": "3", "GROUP_RANK": "1", "SLURM_NODEID": "0"}).node == 1
    assert rank_place({"SLURM_PROCID": "3", "SLURM_NODEID": "2"}).node == 2
    assert rank_place({}).node == 0


def test_mesh_groups_are_init_device_mesh_row_major():
    layout = Layout(dp=2, tp=2, pp=2)
    assert mesh_groups(layout, "tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert mesh_groups(layout, "dp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert mesh_groups(layout, "pp") == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_which_collectives_cross_nodes():
    two_by_four = _nodes(0, 0, 0, 0, 1, 1, 1, 1)
    assert cross_node_dims(Layout(dp=2, tp=2, pp=2), two_by_four) == ["pp"]
    assert cross_node_dims(Layout(dp=4, tp=2), two_by_four) == ["dp"]
    assert cross_node_dims(Layout(dp=8), _nodes(*[0] * 8)) == []
    spread = _nodes(0, 1, 0, 1)  # a tp pair split over nodes: a layout to avoid, but named
    assert cross_node_dims(Layout(dp=2, tp=2), spread) == ["tp"]
    assert two_by_four.n_nodes == 2 and two_by_four.ranks_per_node() == [4, 4]
    assert two_by_four.describe(1) == "node 1 (host h1, ranks 4-7)"


def test_nproc_that_contradicts_the_launchers_world_is_refused(monkeypatch):
    from accelbench.bench.train.spec import TrainSpec
    from accelbench.bench.train.sweep import check_sweep
    from accelbench.config.errors import ConfigError
    from accelbench.config.presets import get_preset

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    spec = TrainSpec(model=get_preset("gpt2-tiny"), seq_lens=(16,), micro_batches=(2,),
                     gas=(1,), dtypes=("fp32",), device="cpu", nproc=4)
    try:
        check_sweep(spec)
    except ConfigError as err:
        assert str(err).startswith("nproc: 4 ranks asked for, but the launcher started 2")
    else:
        raise AssertionError("not refused")


def test_a_node_is_lost_only_when_all_its_ranks_are_silent(monkeypatch):
    from accelbench.bench.train import nodes
    from accelbench.config.layout import Layout

    two_by_two = _nodes(0, 0, 1, 1)
    monkeypatch.setattr(nodes, "silent_ranks", lambda world: [1, 2, 3])
    lost = nodes.lost_node_outcome(two_by_two, Layout(dp=2, tp=2), {}, RuntimeError("gone"))
    assert lost.status == "error" and lost.reason.startswith("lost node 1 (host h1, ranks 2-3):")
    assert "node 0" not in lost.reason and lost.metrics["collectives_cross_node"] == ["dp"]
    monkeypatch.setattr(nodes, "silent_ranks", lambda world: [1, 3])  # no whole node silent
    assert nodes.lost_node_outcome(two_by_two, Layout(dp=2, tp=2), {}, RuntimeError()) is None
