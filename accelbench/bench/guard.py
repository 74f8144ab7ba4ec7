"""Deciding and catching 'does not fit' and 'cannot run' without crashing a sweep."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from accelbench.bench.outcome import Outcome
from accelbench.config.errors import ConfigError
from accelbench.config.fit import refusal_reason
from accelbench.hardware import device as devices
from accelbench.hardware.detect import available_cpu_memory_bytes

# torch.OutOfMemoryError (what every backend's allocator raises) is torch.cuda's before 2.5
_OOM = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
CPU_AVAILABLE_FRACTION = 0.8  # leave room for the interpreter and whatever shares the machine


def memory_budget_bytes(device: torch.device, mem_limit_bytes: int | None,
                        ranks_on_host: int = 1) -> int | None:
    """Bytes one rank may use. The user's limit is a budget per device, and on a CPU a launched
    rank is the device (as the scaling study counts one core a device), so it bounds one rank;
    the host's memory (80% of what is available) is shared by the ranks on the host."""
    if device.type == "cpu":
        available = int(available_cpu_memory_bytes() * CPU_AVAILABLE_FRACTION)
        share = available // max(ranks_on_host, 1)
        return min(share, mem_limit_bytes) if mem_limit_bytes else share
    return mem_limit_bytes


def refuse_if_too_big(estimate_bytes: float, device: torch.device,
                      mem_limit_bytes: int | None, ranks_on_host: int = 1) -> str | None:
    """A reason to refuse before allocating, or None when one rank's estimate fits one rank's
    budget (memory_budget_bytes); the reason says what decided it (config/fit.py): the user's
    --mem-limit (per device), or the estimate against the device's (the host's share)."""
    budget_bytes = memory_budget_bytes(device, mem_limit_bytes, ranks_on_host)
    if budget_bytes is None or estimate_bytes <= budget_bytes:
        return None
    by_user = mem_limit_bytes is not None and budget_bytes == mem_limit_bytes
    usable = "the device's memory"
    if device.type == "cpu":
        usable = "80% of the host's available memory" + (
            f", shared by its {ranks_on_host} ranks" if ranks_on_host > 1 else "")
    return refusal_reason(estimate_bytes, budget_bytes, by_user, usable)


def is_oom(err: BaseException) -> bool:
    """True for an allocator failure on any device."""
    if isinstance(err, _OOM | MemoryError):
        return True
    text = str(err)
    return "out of memory" in text.lower() or "can't allocate memory" in text


def is_unsupported(err: BaseException) -> bool:
    """True when the operator has no kernel for this dtype/device."""
    return isinstance(err, NotImplementedError) or "not implemented for" in str(err)


@contextmanager
def settled_heap() -> Iterator[None]:
    """Freeze the objects alive before a sweep (torch's and the interpreter's, hundreds of
    thousands) so that the collection before every trial scans only what the sweep made: about
    0.15-0.2 s less a collection on this 2-core VM, the same garbage freed. Unfrozen after."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def release_device_memory(device: torch.device) -> None:
    """Give cached memory back after a cell so the next starts clean."""
    gc.collect()
    devices.empty_cache(device)


def guarded(kind: str, spec: dict, device: torch.device,
            body: Callable[[], Outcome]) -> Outcome:
    """Run one cell; turn OOM, missing kernels and other errors into recorded outcomes."""
    try:
        return body()
    except ConfigError:
        raise  # bad input is the user's to fix: it stops the run (exit 2), it is not a result
    except Exception as err:  # noqa: BLE001 - any failure of one cell must not end the sweep
        if is_oom(err):
            status = "oom"
        elif is_unsupported(err):
            status = "unsupported"
        else:
            status = "error"
        reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        return Outcome(kind, status, spec, reason=reason[:500])
    finally:
        release_device_memory(device)
