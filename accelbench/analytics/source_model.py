"""Prediction intervals with the source as a level of its own (issue 41); no torch.

A residual r = log(predicted / observed) throughput (intervals.Residual) is made with the
run's source left out of the fit. Runs of one source (a software stack, its version and its
measurement conventions) share its error, so the model is one-way random effects:
r = mu + b_source + e_run, b of variance tau^2 between sources, e of variance sigma^2 within
one. Moment estimates, each source weighing once:

  m_s, n_s  the mean residual and the run count of source s (S sources, N runs)
  mu        the mean of the m_s
  sigma^2   sum over sources of sum (r - m_s)^2, over N - S (pooled within)
  V_b       sum (m_s - mu)^2 / (S - 1)           (between, unweighted)
  tau^2     max(0, V_b - sigma^2 x mean(1/n_s))

A run of a stack no shipped run used (the default: --stack unknown) is predicted around mu with
variance tau^2 + sigma^2 + V_b / S. A run of a named, fitted stack of one source is predicted
around that source's shrunken mean mu + w (m_s - mu), w = tau^2 / (tau^2 + sigma^2 / n_s), with
variance sigma^2 + w sigma^2 / n_s + (1 - w)^2 V_b / S; a stack of J sources (Megatron-LM's two
papers) around the mean of their means, with their own disagreement V_k added (sigma^2 +
tau_k^2 + V_k / J); a named interval wider than the unseen one gives way to it. Each bound is
Student's t quantile of that variance, its degrees of freedom by Satterthwaite from the mean
squares (V_b on S - 1, sigma^2 on N - S): with seven sources the between-source spread is
itself uncertain, and the unseen interval widens for it.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist

from accelbench.analytics.intervals import COVERAGE, Covered, Interval, Residual

MIN_SOURCES = 3  # fewer shipped sources behind a generation or a stack: flagged as thin
UNKNOWN_STACK = "unknown"
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 41


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile at p with df degrees of freedom (df below 1 taken as 1): the
    Cornish-Fisher series in 1/df (Abramowitz and Stegun 26.7.5), within 0.01 of the exact
    value from df 2 on (1.476 at p 0.9, df 5)."""
    z, v = NormalDist().inv_cdf(p), max(1.0, df)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """Degrees of freedom of a sum of mean squares ((value, its df) pairs); inf when every
    part has infinite df or the sum is zero."""
    total = sum(value for value, _ in parts)
    spread = sum(value**2 / df for value, df in parts if df > 0 and value > 0)
    return total**2 / spread if spread > 0 else math.inf


@dataclass(frozen=True)
class Spread:
    """A predicted log-residual: centre, variance and the degrees of freedom of its bound."""

    centre: float
    var: float
    df: float

    def interval(self, coverage: float, group: str, n: int) -> Interval:
        """The `coverage` interval of observed / predicted: exp(-(centre -+ t sd))."""
        q = t_quantile(1 - (1 - coverage) / 2, self.df) * math.sqrt(self.var)
        return Interval(math.exp(-self.centre - q), math.exp(-self.centre + q), group, n,
                        coverage)


@dataclass(frozen=True)
class SourceFit:
    """The moment estimates of the module docstring, from residuals grouped by source, and
    each source's stack."""

    mu: float
    within_var: float  # sigma^2
    within_df: int  # N - S
    between_ms: float  # V_b
    means: dict[str, tuple[float, int]]  # source -> (mean residual, runs)
    stack_of: dict[str, str]  # source -> its stack

    @property
    def n_sources(self) -> int:
        """S, the sources behind the fit."""
        return len(self.means)

    @property
    def n_runs(self) -> int:
        """N, the runs behind the fit."""
        return sum(n for _, n in self.means.values())

    def _h(self, sources: Iterable[str]) -> float:
        """The mean of 1 / n over `sources`."""
        return statistics.fmean(1 / self.means[s][1] for s in sources)

    @property
    def tau2(self) -> float:
        """The between-source variance, floored at zero."""
        return max(0.0, self.between_ms - self.within_var * self._h(self.means))

    def stacks(self) -> dict[str, list[str]]:
        """Each fitted stack's sources."""
        out: dict[str, list[str]] = {}
        for source in self.means:
            out.setdefault(self.stack_of[source], []).append(source)
        return out

    def unseen(self) -> Spread:
        """A run of a source (a stack) the fit has not seen."""
        k, s2, vb, tau2 = self.n_sources, self.within_var, self.between_ms, self.tau2
        h = self._h(self.means)
        parts = ([(vb * (1 + 1 / k), k - 1), (s2 * (1 - h), self.within_df)] if tau2 > 0
                 else [(s2, self.within_df), (vb / k, k - 1)])
        return Spread(self.mu, tau2 + s2 + vb / k, satterthwaite(parts))

    def named(self, stack: str) -> Spread:
        """A new run of a fitted stack: around its one source's shrunken mean, or, for a
        stack of several sources, around their mean with their own disagreement added."""
        sources = self.stacks()[stack]
        if len(sources) > 1:
            return self._several(sources)
        mean, n = self.means[sources[0]]
        s2, tau2, k = self.within_var, self.tau2, self.n_sources
        w = tau2 / (tau2 + s2 / n) if tau2 + s2 > 0 else 1.0
        parts = [(s2 * (1 + w / n), self.within_df), ((1 - w) ** 2 * self.between_ms / k, k - 1)]
        return Spread(self.mu + w * (mean - self.mu), sum(v for v, _ in parts),
                      satterthwaite(parts))

    def _several(self, sources: list[str]) -> Spread:
        """A stack of J sources: the mean of their means, with variance sigma^2 + tau_k^2 +
        V_k / J, V_k the spread of its sources' means (J - 1 degrees of freedom)."""
        means = [self.means[s][0] for s in sources]
        j, s2, h = len(sources), self.within_var, self._h(sources)
        vk = statistics.variance(means)
        parts = ([(vk * (1 + 1 / j), j - 1), (s2 * (1 - h), self.within_df)]
                 if vk > s2 * h else [(s2, self.within_df), (vk / j, j - 1)])
        return Spread(statistics.fmean(means), sum(v for v, _ in parts), satterthwaite(parts))


def fit_sources(residuals: Iterable[Residual]) -> SourceFit:
    """The moment estimates from residuals (ValueError with fewer than two sources: no
    between-source spread can be estimated)."""
    groups: dict[str, list[float]] = {}
    stack_of: dict[str, str] = {}
    for r in residuals:
        groups.setdefault(r.source, []).append(r.log_ratio)
        stack_of[r.source] = r.stack or r.source
    if len(groups) < 2:
        raise ValueError(f"{len(groups)} source(s): the between-source spread needs two")
    means = {k: (statistics.fmean(v), len(v)) for k, v in groups.items()}
    within = sum((x - means[k][0]) ** 2 for k, v in groups.items() for x in v)
    df = sum(len(v) for v in groups.values()) - len(groups)
    mu = statistics.fmean(m for m, _ in means.values())
    vb = sum((m - mu) ** 2 for m, _ in means.values()) / (len(means) - 1)
    return SourceFit(mu, within / df if df else 0.0, df, vb, means, stack_of)


@dataclass
class IntervalModel:
    """Residuals by source and the intervals they give: a named, fitted stack's, or an unseen
    stack's (wider: it carries the between-source spread)."""

    residuals: tuple[Residual, ...]
    coverage: float = COVERAGE
    device: str = ""  # what the residuals stand for beyond an unseen stack ('' or a phrase)
    _fits: dict[tuple[str | None, str | None], SourceFit] = field(default_factory=dict,
                                                                 repr=False)

    def fit(self, leave_out: str | None = None, drop: str | None = None) -> SourceFit:
        """The fit without source `leave_out` and without the run named `drop` (cached)."""
        key = (leave_out, drop)
        if key not in self._fits:
            self._fits[key] = fit_sources(r for r in self.residuals
                                         if r.source != leave_out and r.name != drop)
        return self._fits[key]

    def interval(self, stack: str | None = None, leave_out: str | None = None,
                 drop: str | None = None) -> Interval:
        """The interval of a run of `stack`: named where the fit holds runs of it (never wider
        than an unseen stack's), else that of an unseen stack (never narrower for a stack it
        does not know)."""
        fit = self.fit(leave_out, drop)
        where = f" on {self.device}" if self.device else ""
        unseen = fit.unseen().interval(
            self.coverage, f"unseen stack{where} ({fit.n_sources} sources, {fit.n_runs} runs)",
            fit.n_runs)
        sources = fit.stacks().get(stack or "")
        if not sources:
            return unseen
        runs, spread = sum(fit.means[s][1] for s in sources), fit.named(str(stack))
        named = spread.interval(
            self.coverage, f"stack {stack}{where} ({runs} run{'s' if runs > 1 else ''}, "
                           f"{len(sources)} source{'s' if len(sources) > 1 else ''}; centred on "
                           f"{math.exp(-spread.centre):.2f}x the prediction)", runs)
        if named.high / named.low > unseen.high / unseen.low:  # its sources disagree
            return replace(unseen, group=f"stack {stack}: its {len(sources)} sources disagree "
                                         f"as much as any; {unseen.group}")
        return named

    def stacks(self) -> tuple[str, ...]:
        """The fitted stacks, in order of first appearance."""
        return tuple(self.fit().stacks())

    def sources(self, keep: Callable[[Residual], bool]) -> int:
        """How many distinct sources hold a residual that `keep` accepts."""
        return len({r.source for r in self.residuals if keep(r)})


# --- Judging the method: per source, each source weighing once ---


def per_source(rows: Iterable[Covered], value: Callable[[Covered], float]
               ) -> dict[str, float]:
    """The mean of `value` over each source's rows."""
    groups: dict[str, list[float]] = {}
    for row in rows:
        groups.setdefault(row.residual.source, []).append(value(row))
    return {source: statistics.fmean(v) for source, v in groups.items()}


def bootstrap_mean(values: Sequence[float], coverage: float = 0.9,
                   resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
                   ) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (one a source), resampling the
    sources: how far the coverage estimate itself can be trusted."""
    rng, n = random.Random(seed), len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples))
    a = (1 - coverage) / 2
    return means[int(a * (resamples - 1))], means[int((1 - a) * (resamples - 1))]


def width(row: Covered) -> float:
    """An interval's width as high / low."""
    return row.interval.high / row.interval.low


def centred_error(row: Covered) -> float:
    """|error| of the interval's centre (its geometric middle) as the prediction: a named
    stack's corrected prediction."""
    centre = math.sqrt(row.interval.low * row.interval.high)
    return abs(math.exp(row.residual.log_ratio) * centre - 1)


def point_error(row: Covered) -> float:
    """|predicted / observed - 1| of the planner's own prediction."""
    return abs(math.exp(row.residual.log_ratio) - 1)


def summary(rows: Sequence[Covered], error: Callable[[Covered], float] = point_error
            ) -> dict[str, object]:
    """Coverage per source (each source once, with its bootstrap 90% interval over sources)
    and per run, |error| (median, worst) and the median width of a set of judged runs."""
    if not rows:
        return {"runs": 0, "sources": 0}
    by_source = per_source(rows, lambda r: float(r.inside))
    errors = [error(r) for r in rows]
    return {"runs": len(rows), "sources": len(by_source),
            "inside": sum(r.inside for r in rows),
            "coverage_per_source": statistics.fmean(by_source.values()),
            "coverage_per_source_90": list(bootstrap_mean(list(by_source.values()))),
            "coverage_per_run": sum(r.inside for r in rows) / len(rows),
            "median_abs_error": statistics.median(errors), "worst_abs_error": max(errors),
            "median_width": statistics.median(width(r) for r in rows),
            "by_source": by_source}


def summary_by(rows: Sequence[Covered], key: Callable[[Covered], str],
               error: Callable[[Covered], float] = point_error) -> dict[str, dict[str, object]]:
    """summary() of each value of `key`, in order of first appearance, then "overall"."""
    keys = list(dict.fromkeys(map(key, rows)))
    out = {k: summary([r for r in rows if key(r) == k], error) for k in keys}
    return {**out, "overall": summary(rows, error)}
