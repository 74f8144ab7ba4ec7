"""Which ranks of a multi-node group are still alive, through a key-value store rank 0 serves.

Rank 0 opens a TCPStore server (a free port on its host) and hands its address to the group;
every rank adds 1 to its counter `alive/<rank>` there every BEAT_S seconds (a daemon thread).
When a collective fails, rank 0 reads every counter, waits SILENT_AFTER_S and reads them again:
a rank whose counter did not move is gone (its process, its agent or its node). The store is
rank 0's own, not torchrun's (which the agent of whichever node won the rendezvous endpoint
serves, and which dies with that node), so rank 0 can always ask it.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import threading
import time

import torch.distributed as dist

BEAT_S = 0.5
SILENT_AFTER_S = 5.0  # ten beats: a living rank's thread gets a core in that time, loaded too
VERDICT_WAIT_S = SILENT_AFTER_S + 15.0  # how long the others wait for rank 0's record
_VERDICT = "verdict"
CONNECT_S = 30.0
_PREFIX = "alive/"
_stores: list[dist.Store] = []  # this process's connection (rank 0: the server)


def _open(host: str, port: int, serve: bool) -> dist.TCPStore:
    """The server (port 0: a free one) or a client of it."""
    return dist.TCPStore(host, port, None, serve, datetime.timedelta(seconds=CONNECT_S),
                         wait_for_workers=False)


def start_beating(rank: int) -> None:
    """Rank 0 serves the store and every rank starts beating into it (a collective: every
    rank of the default group calls it)."""
    address: list[object] = [None]
    if rank == 0:
        server = _open(socket.gethostname(), 0, True)
        _stores[:] = [server]
        address = [(socket.gethostname(), server.port)]
    dist.broadcast_object_list(address, src=0)
    if rank != 0:
        host, port = address[0]  # type: ignore[misc]
        _stores[:] = [_open(host, port, False)]
    store = _stores[0]
    store.add(_PREFIX + str(rank), 1)

    def beat() -> None:
        while True:
            time.sleep(BEAT_S)
            with contextlib.suppress(RuntimeError, OSError):  # a missed beat: try the next
                store.add(_PREFIX + str(rank), 1)

    threading.Thread(target=beat, name="accelbench-liveness", daemon=True).start()


def silent_ranks(world_size: int, wait_s: float = SILENT_AFTER_S) -> list[int]:
    """The ranks whose beats stopped: counters unchanged over wait_s ([] without a store);
    rank 0, which asks, is alive."""
    if not _stores:
        return []
    store = _stores[0]
    try:
        before = [store.add(_PREFIX + str(r), 0) for r in range(world_size)]
        time.sleep(wait_s)
        after = [store.add(_PREFIX + str(r), 0) for r in range(world_size)]
    except (RuntimeError, OSError):  # dist.DistStoreError is a RuntimeError
        return []
    return [r for r in range(1, world_size) if after[r] == before[r]]


def give_verdict() -> None:
    """Rank 0 has recorded what it could: the ranks waiting in wait_for_verdict may exit."""
    if _stores:
        with contextlib.suppress(RuntimeError, OSError):
            _stores[0].set(_VERDICT, "1")


def wait_for_verdict(timeout_s: float = VERDICT_WAIT_S) -> None:
    """A surviving rank waits (up to timeout_s) for rank 0 to record the failure before it
    exits: torchrun stops every rank of a node once one of them fails, rank 0 among them."""
    if _stores:
        with contextlib.suppress(RuntimeError, OSError):
            _stores[0].wait([_VERDICT], datetime.timedelta(seconds=timeout_s))
