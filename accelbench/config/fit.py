"""How a "fits" or "does not fit" was reached, said in every record, table and report: the
cell ran (or its allocator ran out of memory), an estimate against what the device can use, or
the user's --mem-limit. The refusal's words are written and read here only."""

from __future__ import annotations

from accelbench.config.records.seq_search import FITS
from accelbench.config.vocab import GIB

__all__ = ["DOES_NOT_FIT", "FITS", "FIT_BASES", "fit_basis", "fit_text", "refusal_reason"]

DOES_NOT_FIT = "does not fit"  # and FITS: the two verdicts
FIT_BASES = ("measured", "estimated", "budget")
_BY_USER, _ESTIMATED = f"{DOES_NOT_FIT} (user budget)", f"{DOES_NOT_FIT} (estimated)"
_BEFORE = "decided before allocating"


def refusal_reason(estimate_bytes: float, budget_bytes: float, by_user: bool,
                   usable: str) -> str:
    """The reason of a cell refused before allocating, naming what decided it."""
    if by_user:
        return (f"{_BY_USER}: estimated {estimate_bytes / GIB:.2f} GiB > --mem-limit "
                f"{budget_bytes / GIB:.2f} GiB ({_BEFORE})")
    return (f"{_ESTIMATED}: estimated {estimate_bytes / GIB:.2f} GiB > {budget_bytes / GIB:.2f} "
            f"GiB usable ({usable}; {_BEFORE}; --verify-fit runs it)")


def fit_basis(status: str, reason: str) -> str | None:
    """How a cell's fit was decided (FIT_BASES), from its status and reason; records written
    before the reason said so were refused by estimate. None: not a question of fit."""
    if status == "ok":
        return "measured"
    if status != "oom":
        return None
    if reason.startswith(_BY_USER):
        return "budget"
    return "estimated" if _BEFORE in reason else "measured"


def fit_text(status: str, reason: str) -> str:
    """'does not fit (estimated)', '... (user budget)', '... (measured)', or the status."""
    basis = fit_basis(status, reason)
    if status != "oom":
        return status
    return f"{DOES_NOT_FIT} ({'user budget' if basis == 'budget' else basis})"
