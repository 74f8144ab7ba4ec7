"""Whether a training cell fits, and the largest micro-batch that does (one process)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from accelbench.bench.bisection import largest_that_fits
from accelbench.bench.gemm_peak import Peak
from accelbench.bench.guard import (
    is_oom,
    refuse_if_too_big,
    release_device_memory,
)
from accelbench.bench.train.cell import estimate_bytes
from accelbench.bench.train.cell_metrics import cell_counts
from accelbench.bench.train.spec import TrainCell, TrainSpec
from accelbench.bench.train.steps import run_rank_steps
from accelbench.config.layout import Layout

MAX_MICRO_BATCH = 4096
ONE_DEVICE = Layout()


def _fits_by_trial(spec: TrainSpec, cell: TrainCell, device: torch.device) -> bool:
    """Run two real steps at this size; False if the device runs out of memory."""
    trial = replace(spec, steps=2, warmup_steps=0, time_budget_s=None)
    trial_cell = replace(cell, gas=1)
    counts = cell_counts(trial, trial_cell, ONE_DEVICE, Peak(None, cell.dtype, "none"))
    try:
        run_rank_steps(trial, trial_cell, ONE_DEVICE, device, counts, None)
        return True
    except Exception as err:  # noqa: BLE001 - only OOM means "too big"; re-raise the rest
        if is_oom(err):
            return False
        raise
    finally:
        release_device_memory(device)


def fit_check(spec: TrainSpec, device: torch.device) -> tuple[Callable[[TrainCell], bool], str]:
    """Whether a cell fits, and how that is decided: by trial on an accelerator (two real steps;
    an OOM means no), by the memory estimate against the budget on a CPU or under --mem-limit."""
    by_trial = device.type != "cpu" and spec.mem_limit_bytes is None

    def fits(cell: TrainCell) -> bool:
        if by_trial:
            return _fits_by_trial(spec, cell, device)
        return refuse_if_too_big(estimate_bytes(spec, cell, ONE_DEVICE), device,
                                 spec.mem_limit_bytes) is None

    return fits, "trial" if by_trial else "estimate"


def find_max_micro_batch(spec: TrainSpec, cell: TrainCell,
                         device: torch.device) -> tuple[int, dict]:
    """Largest micro-batch that fits: doubling from 1, then bisection between the last fit and
    the first miss. Returns 0 when even a micro-batch of 1 does not fit, and the search."""
    fits, method = fit_check(spec, device)
    search = largest_that_fits(lambda mb: fits(replace(cell, micro_batch=mb)),
                               start=1, limit=MAX_MICRO_BATCH)
    return search.largest, {"method": method, "largest": search.largest,
                            "tried": search.tried()}
