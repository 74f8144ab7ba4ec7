"""Process group set-up from the launcher's environment (torchrun or Slurm), and the mesh.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT. Under `srun` without
torchrun, SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID give the same, and the master address is
the first host of SLURM_NODELIST unless MASTER_ADDR is set. Backend: torch's default for the
device type (nccl on CUDA and ROCm, gloo on CPU).
"""

from __future__ import annotations

import datetime
import inspect
import os
import re
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from accelbench.config.layout import MESH_DIMS, Layout
from accelbench.hardware import device as devices

DEFAULT_PORT = 29500
# A collective that waits longer fails on every rank that waits: a dead or stopped peer ends the
# group within five minutes (the training runner passes its --hang-timeout, of the same default).
DEFAULT_TIMEOUT_S = 300.0
_timeout_s = [DEFAULT_TIMEOUT_S]  # the group's, for the mesh's subgroups too


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits: global rank, world size, rank on its node, rendezvous address."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    launcher: str  # "torchrun", "slurm" or "single"


def first_slurm_host(nodelist: str) -> str:
    """First host of a Slurm node list: 'gpu[003-005,007],cpu1' -> 'gpu003'."""
    head = re.match(r"([^,\[]+)(\[([^\]]+)\])?", nodelist.strip())
    if head is None:
        raise ValueError(f"cannot read SLURM_NODELIST {nodelist!r}")
    prefix, ranges = head.group(1), head.group(3)
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def read_env(env: dict[str, str] | None = None) -> DistEnv:
    """Rank, world and rendezvous from torchrun's or Slurm's variables; one process otherwise."""
    env = dict(os.environ if env is None else env)
    port = int(env.get("MASTER_PORT", DEFAULT_PORT))
    if "RANK" in env and "WORLD_SIZE" in env:
        return DistEnv(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0)),
                       env.get("MASTER_ADDR", "127.0.0.1"), port, "torchrun")
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        addr = env.get("MASTER_ADDR") or first_slurm_host(env.get("SLURM_NODELIST", "127.0.0.1"))
        return DistEnv(int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]),
                       int(env.get("SLURM_LOCALID", 0)), addr, port, "slurm")
    return DistEnv(0, 1, 0, "127.0.0.1", port, "single")


VISIBLE_DEVICES_VARS = {"cuda": ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"),
                        "xpu": ("ZE_AFFINITY_MASK",), "hpu": ("HABANA_VISIBLE_MODULES",)}


def bound_device_index(local_rank: int, kind: str, count: int,
                       env: dict[str, str] | None = None) -> int:
    """The device index a rank should use: 0 when the launcher bound one device to it (srun
    --gpus-per-task=1 leaves CUDA_VISIBLE_DEVICES naming one), its local rank otherwise; one
    line naming the variables when that index does not exist among the `count` visible."""
    env = dict(os.environ if env is None else env)
    named = [(var, env[var]) for var in VISIBLE_DEVICES_VARS.get(kind, ()) if env.get(var)]
    bound_one = any(len([d for d in value.split(",") if d.strip()]) == 1 for _, value in named)
    index = 0 if bound_one else local_rank
    if not 0 <= index < count:
        seen = ", ".join(f"{var}={value}" for var, value in named) or "no visible-devices variable"
        raise ValueError(f"LOCAL_RANK={local_rank} needs {kind} device {index}, but this process "
                         f"sees {count} ({seen}): bind one device a rank or launch at most "
                         f"{count} ranks a node")
    return index


def device_for(local_rank: int, device_type: str | None = None) -> torch.device:
    """This rank's device: cuda:<index> when CUDA is present, else cpu; an asked-for type with
    several devices a node (cuda, xpu, hpu) is indexed as the launcher bound it
    (bound_device_index: 0 when one device is visible to the rank, else the local rank)."""
    kind = device_type or ("cuda" if devices.is_available("cuda") else "cpu")
    if kind in devices.PER_RANK_KINDS:
        index = bound_device_index(local_rank, kind, devices.device_count(kind))
        device = torch.device(kind, index)
        devices.set_current(device)
        return device
    return torch.device(kind)


def backend_for(device: torch.device) -> str:
    """The process-group backend torch pairs with this device type (nccl for CUDA and ROCm,
    gloo for the CPU and for types torch pairs with nothing)."""
    pairs = getattr(dist.Backend, "default_device_backend_map", {"cuda": "nccl"})
    return pairs.get(device.type, "gloo")


def init_kwargs(backend: str, device: torch.device) -> dict[str, object]:
    """Extra init_process_group arguments: NCCL gets the rank's device (`device_id`, where this
    torch takes it), so its communicator is made at once on the right GPU instead of lazily on
    whichever is current at the first collective."""
    if backend != "nccl" or device.type != "cuda" or device.index is None:
        return {}
    params = inspect.signature(dist.init_process_group).parameters
    return {"device_id": device} if "device_id" in params else {}


def init_distributed(device_type: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                     env: dict[str, str] | None = None) -> tuple[DistEnv, torch.device]:
    """Join the process group the launcher set up (idempotent); returns (env, this rank's device).

    The timeout bounds every collective (the mesh's subgroups too: make_mesh), so a dead peer
    ends this rank with an error instead of a hang. A single process with no launcher variables
    still gets a group of one. When a group exists already, its timeout stays.
    """
    info = read_env(env)
    device = device_for(info.local_rank, device_type)
    if dist.is_initialized():
        return info, device
    backend = backend_for(device)
    if env is None:  # env:// reuses torchrun's store; Slurm gets the variables it lacks
        os.environ.setdefault("MASTER_ADDR", info.master_addr)
        os.environ.setdefault("MASTER_PORT", str(info.master_port))
        init = "env://"
    else:
        init = f"tcp://{info.master_addr}:{info.master_port}"
    dist.init_process_group(backend=backend, init_method=init, rank=info.rank,
                            world_size=info.world_size,
                            timeout=datetime.timedelta(seconds=timeout_s),
                            **init_kwargs(backend, device))
    _timeout_s[0] = timeout_s
    return info, device


def group_timeout() -> datetime.timedelta:
    """How long a collective of this process's groups waits (the world group's timeout)."""
    return datetime.timedelta(seconds=_timeout_s[0])


def teardown(together: bool = False) -> None:
    """Leave the process group (safe to call when none exists).

    together=True (only on the clean path: a failed rank must exit at once) first waits for
    every rank, so no rank closes its connections while a peer's transport threads still use
    them (a gloo rank was seen to abort at exit without it).
    """
    if not dist.is_initialized():
        return
    try:
        if together:
            dist.barrier()
    finally:
        dist.destroy_process_group()


def make_mesh(layout: Layout, device: torch.device) -> DeviceMesh:
    """The (pp, dp, tp) device mesh of a layout over the current world; its subgroups wait in
    a collective no longer than the world group does (torch gives new groups its own default,
    30 minutes on gloo, 10 on NCCL)."""
    mesh = init_device_mesh(device.type, layout.mesh_shape, mesh_dim_names=MESH_DIMS)
    set_timeout = getattr(dist.distributed_c10d, "_set_pg_timeout", None)
    if set_timeout is not None and dist.get_world_size() > 1:
        for name in MESH_DIMS:
            group = mesh.get_group(name)
            if group is not dist.group.WORLD and group.size() > 1:
                set_timeout(datetime.timedelta(seconds=_timeout_s[0]), group)
    return mesh


@dataclass(frozen=True)
class ExpertGroups:
    """This rank's expert-parallel groups: the ep group its MoE layers exchange tokens in (ep
    consecutive data-parallel ranks) and the expert-data-parallel group (dp / ep ranks that hold
    the same experts, strided by ep) its expert gradients are reduced over."""

    ep_group: dist.ProcessGroup
    edp_group: dist.ProcessGroup
    ep_rank: int  # this rank's place in its ep group: it holds experts [ep_rank * E/ep, ...)
    edp_size: int


def expert_groups(layout: Layout, mesh: DeviceMesh) -> ExpertGroups:
    """The ep and expert-data-parallel groups (Megatron-Core's convention: ep carved out of
    dp, ep innermost), made on every rank in the same order as torch.distributed requires."""
    timeout = datetime.timedelta(seconds=_timeout_s[0])
    ranks = mesh.mesh.reshape(layout.pp, layout.dp, layout.tp)
    me = dist.get_rank()
    mine: dict[str, dist.ProcessGroup] = {}
    for p in range(layout.pp):
        for t in range(layout.tp):
            dp_ranks = ranks[p, :, t].tolist()
            lists = {"ep": [dp_ranks[i:i + layout.ep] for i in range(0, layout.dp, layout.ep)],
                     "edp": [dp_ranks[j::layout.ep] for j in range(layout.ep)]}
            for kind, groups in lists.items():
                for members in groups:
                    group = dist.new_group(members, timeout=timeout)
                    if me in members:
                        mine[kind] = group
    d = mesh.get_local_rank("dp")
    return ExpertGroups(mine["ep"], mine["edp"], d % layout.ep, layout.dp // layout.ep)


def mesh_coords(mesh: DeviceMesh) -> dict[str, int]:
    """This rank's coordinate on each mesh dimension: {'pp': i, 'dp': j, 'tp': k}."""
    return {name: mesh.get_local_rank(name) for name in MESH_DIMS}


def mean_over_replicas(loss: torch.Tensor | None, layout: Layout, device: torch.device) -> float:
    """The global mean loss of a step on every rank: sum of the ranks that hold a loss (the last
    pipeline stage; every tp rank there holds the same value; each cp rank the mean of its
    equal share of tokens) divided by their count dp x cp x tp."""
    value = torch.zeros((), dtype=torch.float64, device=device)
    if loss is not None:
        value += loss.detach().to(torch.float64)
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return float(value)
    dist.all_reduce(value)
    return float(value) / (layout.dp * layout.cp * layout.tp)


def is_rank_zero(env: dict[str, str] | None = None) -> bool:
    """True in a single process and on global rank 0 of a launched group."""
    return read_env(env).rank == 0
