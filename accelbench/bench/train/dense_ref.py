"""A sparse cell against the dense cell of the same configuration in the same sweep: the
wall-clock speedup and the price in loss after the same steps (same seed, same data order)."""

from __future__ import annotations

import json
from dataclasses import replace

from accelbench.analytics.stats import compare, without_gain
from accelbench.bench.outcome import Outcome, Sink
from accelbench.config.record_kinds import carries
from accelbench.config.records.fields import ShownFigure
from accelbench.config.records.train import TrainMetrics
from accelbench.config.trial_count import trial_samples


def _key(spec: dict) -> str:
    """The cell's configuration without its sparsity level."""
    rest = {k: v for k, v in spec.items() if k != "sparsity"}
    return json.dumps(rest, sort_keys=True, default=str)


class DenseReference:
    """Remembers the sweep's ok dense cells and annotates the sparse ones that follow."""

    def __init__(self) -> None:
        self.dense: dict[str, TrainMetrics] = {}
        self.dense_times: dict[str, list[float] | None] = {}

    def annotate(self, outcome: Outcome) -> Outcome:
        """The outcome with speedup_vs_dense and the loss against dense filled where a dense
        cell of its configuration has run (sparsity is the innermost axis: it runs first)."""
        if (not carries(outcome.kind, TrainMetrics) or outcome.status != "ok"
                or outcome.setup.sparsity is None):
            return outcome
        key = _key(outcome.spec)
        if not outcome.setup.sparsity:
            self.dense[key] = outcome.typed
            self.dense_times[key] = trial_samples(outcome.raw, ShownFigure.STEP_TIME)
            return outcome
        dense = self.dense.get(key)
        if dense is None:
            return outcome
        m = outcome.typed
        loss, dense_loss = m.loss_last, dense.loss_last
        extra = dict(speedup_vs_dense=dense.step_time_s_median / m.step_time_s_median,
                     **self._verdict(key, outcome))
        if loss is not None and dense_loss is not None:
            extra.update(loss_last_vs_dense=loss - dense_loss,
                         loss_last_vs_dense_relative=(loss - dense_loss) / dense_loss)
        return replace(outcome, metrics={**outcome.metrics, **extra})

    def _verdict(self, key: str, outcome: Outcome) -> dict:
        """The speedup's interval and verdict from both cells' trials (none with one trial)."""
        base = self.dense_times.get(key)
        times = trial_samples(outcome.raw, ShownFigure.STEP_TIME)
        if base is None or times is None:
            return {}
        verdict = compare(base, times)
        if not outcome.typed.sparse_kernel:  # masked dense: the dense work and the masks
            verdict = without_gain(verdict)
        return dict(speedup_vs_dense_low=verdict.ratio.low,
                    speedup_vs_dense_high=verdict.ratio.high,
                    speedup_vs_dense_verdict=verdict.outcome)

    def sink(self, sink: Sink) -> Sink:
        """`sink` fed annotated outcomes."""
        return lambda outcome: sink(self.annotate(outcome))
