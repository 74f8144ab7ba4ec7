"""DTensor checks without the DTensor import (parallel/dtensors.py): importing the training
runtime imports neither torch.distributed.tensor, FSDP2 nor ZeroRedundancyOptimizer (~0.75 s of
CPU a process), and the checks still answer for real DTensors."""

from __future__ import annotations

import subprocess
import sys

import torch

from accelbench.parallel.dtensors import DTENSOR_MODULE, is_dtensor, local_tensor

HEAVY = (DTENSOR_MODULE, "torch.distributed.fsdp", "torch.distributed.optim")


def test_the_training_runtime_imports_no_dtensor_fsdp_or_zero():
    """The process that launches a sweep's cells (the CLI's) imports the sweep and the rank
    entry point but builds no model; a rank that builds its optimizer imports them anyway,
    through torch.optim's own Dynamo guard (torch 2.13), which imports Dynamo and DTensor."""
    code = ("import sys, accelbench.bench.train.sweep, accelbench.bench.train.launch; "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]


def test_plain_tensors_are_their_own_local_piece():
    t = torch.ones(3)
    assert not is_dtensor(t) and local_tensor(t) is t
    assert not is_dtensor(None) and not is_dtensor(3.0)


def test_a_real_dtensor_is_known_and_gives_its_shard(one_rank_group):
    """A DTensor sharded over a one-rank group is recognised (the module is imported by then)
    and its local piece is the plain tensor it holds."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (1,))
    d = distribute_tensor(torch.arange(4.0), mesh, [Shard(0)])
    assert is_dtensor(d) and not is_dtensor(d.to_local())
    local = local_tensor(d)
    assert type(local) is torch.Tensor and local.tolist() == [0.0, 1.0, 2.0, 3.0]
