"""Check probes of torch.distributed here: a one-rank group's collective, and FSDP2."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from accelbench.bench.check_probe import CheckSettings, Found, NotHere, sync_device


def _free_port() -> int:
    """A TCP port nothing listens on now, for a one-rank group's store."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def _one_rank_group(device: torch.device) -> Iterator[str]:
    """A process group of this process alone on the device's backend; yields the backend."""
    import datetime

    import torch.distributed as dist

    from accelbench.parallel.dist import backend_for, init_kwargs

    if not dist.is_available():
        raise NotHere("this torch is built without torch.distributed")
    if dist.is_initialized():
        raise NotHere("a process group exists already (run check outside torchrun)")
    backend = backend_for(device)
    dist.init_process_group(backend=backend, init_method=f"tcp://127.0.0.1:{_free_port()}",
                            rank=0, world_size=1, timeout=datetime.timedelta(seconds=60),
                            **init_kwargs(backend, device))
    try:
        yield backend
    finally:
        dist.destroy_process_group()


def probe_collective(s: CheckSettings) -> Found:
    """A one-rank group on the device's backend (NCCL, RCCL, gloo) all-reduces a tensor."""
    import torch.distributed as dist

    with _one_rank_group(s.device) as backend:
        t = torch.full((1024,), 2.0, device=s.device)
        dist.all_reduce(t)
        sync_device(s.device)
        if float(t[0]) != 2.0:
            raise RuntimeError(f"{backend} all_reduce over one rank gave {float(t[0])}")
    label = "rccl" if backend == "nccl" and torch.version.hip else backend
    return f"{label}: one-rank all_reduce", {"backend": label}


def probe_fsdp2(s: CheckSettings) -> Found:
    """FSDP2's fully_shard over a one-rank mesh: DTensor parameters, a forward and backward."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    with _one_rank_group(s.device) as backend:
        mesh = init_device_mesh(s.device.type, (1,))
        model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64)).to(s.device)
        fully_shard(model, mesh=mesh)
        if not isinstance(model[0].weight, DTensor):
            raise RuntimeError("fully_shard left plain tensors")
        model(torch.randn(8, 64, device=s.device)).sum().backward()
        sync_device(s.device)
    return f"fully_shard on {backend}: DTensor parameters, forward and backward", {}
