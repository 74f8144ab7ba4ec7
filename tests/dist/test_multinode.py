"""A multi-node launch on one host: two torchrun agents, two ranks each, meet through the c10d
rendezvous on 127.0.0.1 as two "nodes" and run `accelbench train --layout dp=2,tp=2` (gloo, CPU).

One launch, two cells: the first is recorded once, by global rank 0, with the topology (2 nodes,
2 ranks each, tp inside a node, dp's all-reduce crossing nodes); in the second rank 2 (node 1)
holds before its first forward (ACCELBENCH_TEST_FAULT: the 4th forward/backward heartbeat, the
first cell having 3 steps) and node 1's agent is SIGKILLed: its
ranks end themselves with their agent, rank 0's collective fails, and the cell is recorded as an
error naming node 1, all within
the documented bound (SILENT_AFTER_S of roll call after the failure; --hang-timeout where no
connection closes).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelbench.parallel.liveness import SILENT_AFTER_S
from accelbench.parallel.procs import descendants
from accelbench.store.store import ResultStore

pytestmark = pytest.mark.dist
TRAIN = ["-m", "accelbench", "train", "--model",
         "gpt2-tiny:n_layer=2,vocab_size=1024,n_positions=64", "--seq", "16",
         "--micro-batch", "1,2", "--steps", "3", "--warmup-steps", "1", "--dtype", "fp32",
         "--device", "cpu", "--layout", "dp=2,tp=2", "--hang-timeout", "20", "--quiet"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent(port: int, db: Path, log: Path, host: bool) -> subprocess.Popen:
    """One "node": a torchrun agent with two ranks, rendezvous on 127.0.0.1:port (served by the
    `host` agent: torchrun's store, which the other agents cannot outlive)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "ACCELBENCH_TEST_FAULT": "hold:2:forward/backward:4"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
           "--nproc-per-node", "2", "--rdzv-backend", "c10d",
           "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "multinode-test",
           "--rdzv-conf", f"is_host={int(host)}", *TRAIN, "--db", str(db)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("w"), env=env,
                            start_new_session=True)


def _worker_env(agent: subprocess.Popen) -> dict[str, str]:
    """The torchrun variables of the agent's first rank and its PID (empty until it has
    started)."""
    for pid in sorted(descendants(agent.pid)):
        try:
            items = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        env = dict(i.decode(errors="replace").split("=", 1) for i in items if b"=" in i)
        if env.get("LOCAL_RANK") == "0" and "GROUP_RANK" in env:
            return {**env, "PID": str(pid)}
    return {}


def _holding(pid: str) -> bool:
    """Whether the process's main thread sleeps in time.sleep (the test fault's hold)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() == "hrtimer_nanosleep"
    except OSError:
        return False


def _listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait(predicate, limit_s: float) -> None:
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < limit_s, "timed out waiting"
        time.sleep(0.2)


def test_two_nodes_record_once_with_topology_and_a_killed_node_is_named(tmp_path):
    db, port = tmp_path / "results.db", _free_port()
    # The first agent serves the rendezvous and, started first (a lower pid: c10d orders the
    # nodes by host and pid), is node 0 with global rank 0; the test kills the other one.
    agents = [_agent(port, db, tmp_path / "agent0.log", True)]
    _wait(lambda: _listening(port), 60)
    agents.append(_agent(port, db, tmp_path / "agent1.log", False))
    try:
        _wait(lambda: all(_worker_env(a) for a in agents), 120)
        envs = [_worker_env(a) for a in agents]
        zero = next(i for i, e in enumerate(envs) if e["RANK"] == "0")
        assert zero == 0, "the rendezvous host's agent is not node 0 (pid order wrapped?)"
        node0, node1 = agents[zero], agents[1 - zero]
        log0 = tmp_path / f"agent{zero}.log"
        killed_group_rank = envs[1 - zero]["GROUP_RANK"]
        _wait(lambda: "cell 2/2" in log0.read_text() and _holding(envs[1]["PID"]), 150)
        time.sleep(0.5)  # rank 0 now waits for rank 2 in a collective of the step
        os.kill(node1.pid, signal.SIGKILL)  # the agent alone: its ranks must follow it
        killed = time.monotonic()
        node0.wait(timeout=60)
        ended_s = time.monotonic() - killed
    finally:
        for agent in agents:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)
    assert node0.returncode != 0  # the group is broken: rank 0 exits with its error
    assert ended_s < SILENT_AFTER_S + 20, ended_s  # well inside --hang-timeout + roll call
    records = ResultStore(db).query(kind="train")
    assert [r.status for r in records] == ["ok", "error"], [r.reason for r in records]
    ok, lost = records
    assert ok.metrics["n_nodes"] == 2 and ok.metrics["n_devices"] == 4
    assert ok.metrics["ranks_per_node"] == [2, 2]
    assert ok.metrics["collectives_cross_node"] == ["dp"]  # tp stays inside a node
    assert ok.spec["world_size"] == 4 and ok.spec["micro_batch"] == 1
    assert lost.reason.startswith(f"lost node {killed_group_rank} (host "), lost.reason
    assert "ranks 2-3)" in lost.reason and lost.spec["micro_batch"] == 2
    assert lost.metrics["collectives_cross_node"] == ["dp"]
    orphan = Path(f"/proc/{envs[1 - zero]['PID']}")  # a killed agent's rank, now init's
    _wait(lambda: not orphan.exists() or orphan.joinpath("stat").read_text().split()[2] == "Z",
          20)
