"""The longest sequence that fits on the device, found and recorded as results.

For a given model, micro-batch, GAS, dtype and recompute: doubling from a start length, then
bisection between the last fit and the first miss, in steps of `multiple` tokens (the shared
`largest_that_fits`). A probe is decided as `find_max_micro_batch` decides one: two real steps on
an accelerator (out of memory means no), the planner's memory estimate against the budget on a
CPU or under --mem-limit; never by exhausting a CPU's memory. Every probe becomes a record of kind
"seq-search" (status ok = fits, oom = does not fit), and the chosen length is then measured as an
ordinary training cell whose spec carries the search.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from accelbench.bench.bisection import largest_that_fits
from accelbench.bench.gemm_peak import SweepPeaks
from accelbench.bench.guard import memory_budget_bytes
from accelbench.bench.outcome import Outcome, Progress, Sink, Skip, finished
from accelbench.bench.train.batches import check_data
from accelbench.bench.train.cell import KIND, cell_spec, estimate_bytes, run_cell
from accelbench.bench.train.fit_search import ONE_DEVICE, fit_check
from accelbench.bench.train.spec import TrainCell, TrainSpec, validate_train_spec
from accelbench.bench.train.steps import StepProgress
from accelbench.config.errors import ConfigError
from accelbench.config.fit import DOES_NOT_FIT, FITS
from accelbench.config.record_kinds import metrics_dict
from accelbench.config.records.seq_search import SeqSearchMetrics
from accelbench.config.records.train import TrainMetrics
from accelbench.config.vocab import GIB
from accelbench.data.defaults import ensure_default_shards
from accelbench.data.shard_format import open_shards
from accelbench.data.tokenizer import get_tokenizer
from accelbench.hardware.detect import resolve_device

SEARCH_KIND = "seq-search"
MAX_SEQ_LEN = 1 << 20  # search cap for models without a position limit (rotary)
SEQ_MULTIPLE = 64  # lengths tried are multiples of this (GPU kernels like multiples of 64)


def data_tokens(spec: TrainSpec) -> int | None:
    """Tokens in the training data (None for synthetic, which has no end)."""
    if spec.data == "synthetic":
        return None
    tokenizer = get_tokenizer(spec.tokenizer)
    if spec.data == "default":
        return ensure_default_shards(tokenizer).total_tokens
    return open_shards(Path(spec.data).expanduser(), tokenizer, verify_hashes=False).total_tokens


def seq_limit(spec: TrainSpec, multiple: int = SEQ_MULTIPLE) -> tuple[int, str]:
    """The longest length the search may try, and what sets it: the model's learned positions
    (rotary models have no limit of their own), the data (a window needs seq + 1 tokens), or
    the search cap."""
    limits = [(MAX_SEQ_LEN, "search cap")]
    if spec.model.position == "learned":
        limits.append((spec.model.n_positions, "learned positions (n_positions)"))
    tokens = data_tokens(spec)
    if tokens is not None:
        limits.append((tokens - 1, f"data ({tokens:,} tokens)"))
    limit, reason = min(limits)
    if limit < multiple:
        raise ConfigError("seq", f"the longest possible sequence is {limit} ({reason}), below the "
                          f"search step of {multiple}", f">= {multiple}")
    return limit // multiple * multiple, reason


def _probe_outcome(spec: TrainSpec, cell: TrainCell, device: torch.device, fits: bool,
                   method: str, number: int) -> Outcome:
    """One probe as a record: whether this length fits, and the estimate behind it."""
    estimate = estimate_bytes(spec, cell, ONE_DEVICE)
    budget = memory_budget_bytes(device, spec.mem_limit_bytes)
    record_spec = {**cell_spec(spec, cell, ONE_DEVICE, str(device)), "workload": SEARCH_KIND,
                   "probe": number, "method": method}
    metrics = metrics_dict(SeqSearchMetrics(fits=fits, mem_estimate_bytes_per_rank=estimate,
                                            mem_budget_bytes_per_rank=budget))
    how = ("two real training steps" if method == "trial"
           else f"estimate {estimate / GIB:.2f} GiB vs budget {(budget or 0) / GIB:.2f} GiB")
    reason = f"seq {cell.seq_len} {FITS if fits else DOES_NOT_FIT} ({how})"
    return Outcome(SEARCH_KIND, "ok" if fits else "oom", record_spec, metrics, reason=reason)


def find_longest_seq(spec: TrainSpec, cell: TrainCell, device: torch.device,
                     sink: Sink | None = None, multiple: int = SEQ_MULTIPLE) -> tuple[int, dict]:
    """Longest multiple of `multiple` that fits, doubling from cell.seq_len; 0 when none does.

    Each probe's outcome goes to `sink` as it is decided. Returns the length and the search
    (method, start, limit and what set it, every probe in order).
    """
    fits, method = fit_check(spec, device)
    limit, limit_reason = seq_limit(spec, multiple)
    search_log: list[int] = []

    def probe(seq: int) -> bool:
        probe_cell = replace(cell, seq_len=seq)
        ok = fits(probe_cell)
        if sink is not None:
            sink(_probe_outcome(spec, probe_cell, device, ok, method, len(search_log) + 1))
        search_log.append(seq)
        return ok

    search = largest_that_fits(probe, start=cell.seq_len, limit=limit, multiple=multiple)
    return search.largest, {"method": method, "start": cell.seq_len, "multiple": multiple,
                            "limit": limit, "limit_reason": limit_reason,
                            "largest": search.largest, "tried": search.tried()}


def search_cells(spec: TrainSpec) -> list[TrainCell]:
    """One cell per (micro-batch, GAS, dtype, recompute), starting at the one --seq value;
    ConfigError when the spec cannot be searched."""
    if len(spec.seq_lens) != 1:
        raise ConfigError("seq", "the longest-sequence search starts from one length, got "
                          f"{len(spec.seq_lens)}", "one --seq value")
    if spec.max_micro_batch:
        raise ConfigError("longest-seq", "cannot search sequence and micro-batch at once",
                          "--longest-seq or --max-micro-batch")
    if spec.nproc > 1 or spec.layout:
        raise ConfigError("longest-seq", "the search runs on one device, without a layout",
                          "--nproc 1 and no --layout")
    return spec.cells()


def run_longest_seq_sweep(spec: TrainSpec, sink: Sink, progress: StepProgress | None = None,
                          on_cell: Progress | None = None,
                          skip: Skip | None = None) -> list[Outcome]:
    """For each cell: search the longest sequence (probes recorded), then measure it. `skip`
    is asked about the cell as given (its starting --seq), so a finished one is not searched."""
    validate_train_spec(spec)
    spec = replace(spec, trials=1)  # the length found is measured once (no trials yet)
    cells = search_cells(spec)
    check_data(spec)
    device = resolve_device(spec.device)
    peaks = SweepPeaks(device, spec.tf32, sink, known=spec.peaks)
    outcomes = []
    for i, cell in enumerate(cells):
        if on_cell:
            on_cell(i, len(cells), f"longest sequence from {cell.label}")
        start = cell_spec(spec, cell, ONE_DEVICE, str(device))
        asked = {**start, "seq_search": "longest"}  # not the plain cell at the start length
        done = finished(skip, KIND, asked)
        if done is not None:
            peaks.adopt(done)
            outcomes.append(done)
            continue
        seq, search = find_longest_seq(spec, cell, device, sink)
        if seq == 0:
            outcome = Outcome(KIND, "oom", {**start, "seq_search": search},
                              metrics_dict(TrainMetrics()),
                              reason=f"no sequence of {SEQ_MULTIPLE} or more fits")
        else:
            peak = peaks.get(cell.dtype).peak()
            outcome = run_cell(spec, replace(cell, seq_len=seq), ONE_DEVICE, device, peak,
                               progress)
            outcome = replace(outcome, spec={**outcome.spec, "seq_search": search})
        outcome = replace(outcome, asked_spec=asked)
        sink(outcome)
        outcomes.append(outcome)
    return outcomes
