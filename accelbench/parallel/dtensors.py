"""Whether a tensor is a DTensor, and its local piece, without importing DTensor: a process
that never imported torch.distributed.tensor holds none. That import (with FSDP2's and
ZeroRedundancyOptimizer's) is ~0.75 s of CPU, which the process launching a sweep's cells (it
builds no model) need not pay; the layouts that make DTensors (tp, sp, zero 2/3, sharded
experts) import them where they apply themselves. A rank building its optimizer imports them
anyway, with Dynamo, through torch.optim's own Dynamo guard (torch 2.13)."""

from __future__ import annotations

import sys

import torch

DTENSOR_MODULE = "torch.distributed.tensor"


def is_dtensor(t: object) -> bool:
    """Whether t is a DTensor (never, where torch.distributed.tensor was not imported)."""
    module = sys.modules.get(DTENSOR_MODULE)
    return module is not None and isinstance(t, module.DTensor)


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """This rank's piece of t: a DTensor's local shard, else t itself."""
    return t.to_local() if is_dtensor(t) else t
