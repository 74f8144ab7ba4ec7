"""Which ranks of a multi-node group are still alive, through the group's own key-value store.

Each rank adds 1 to its counter `accelbench/alive/<rank>` in the store every BEAT_S seconds
(a daemon thread). When a collective fails, rank 0 reads every counter, waits SILENT_AFTER_S and
reads them again: a rank whose counter did not move is gone (its process, its agent or its
node). The store is torchrun's (held by the agent of node 0) or, under srun, the one rank 0
serves: it outlives every other node, so rank 0 can always ask it.
"""

from __future__ import annotations

import contextlib
import threading
import time

import torch.distributed as dist

BEAT_S = 0.5
SILENT_AFTER_S = 3.0  # six beats: a living rank's thread gets the interpreter in that time
_PREFIX = "accelbench/alive/"


def _store() -> dist.Store | None:
    """The default group's store (None where this torch does not expose it)."""
    get = getattr(dist.distributed_c10d, "_get_default_store", None)
    try:
        return get() if get is not None else None
    except RuntimeError:
        return None


def start_beating(rank: int) -> bool:
    """Start this rank's beat thread; False when the group has no store to beat in."""
    store = _store()
    if store is None:
        return False
    store.add(_PREFIX + str(rank), 1)

    def beat() -> None:
        with contextlib.suppress(Exception):  # the store gone: the group is over anyway
            while True:
                time.sleep(BEAT_S)
                store.add(_PREFIX + str(rank), 1)

    threading.Thread(target=beat, name="accelbench-liveness", daemon=True).start()
    return True


def silent_ranks(world_size: int, wait_s: float = SILENT_AFTER_S) -> list[int]:
    """The ranks whose beats stopped: counters unchanged over wait_s ([] without a store)."""
    store = _store()
    if store is None:
        return []
    before = [store.add(_PREFIX + str(r), 0) for r in range(world_size)]
    time.sleep(wait_s)
    after = [store.add(_PREFIX + str(r), 0) for r in range(world_size)]
    return [r for r in range(world_size) if after[r] == before[r]]
