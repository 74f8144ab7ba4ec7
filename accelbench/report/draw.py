"""Draws a report Figure with matplotlib (the Agg canvas: no display, no pyplot state) into
PNG bytes and SVG text. matplotlib is imported here only, when drawing: the other commands
start without it."""

from __future__ import annotations

import io
from typing import Any

from accelbench.config.errors import ConfigError
from accelbench.report.content import MEASURED, PREDICTED, Figure, Panel, Series

MISSING = "needs matplotlib (a dependency of accelbench): pip install 'matplotlib>=3.7'"
PANEL_W, PANEL_H, DPI = 5.6, 4.2, 100


def _matplotlib() -> tuple[Any, Any, Any]:
    """matplotlib's Figure, Agg canvas and rc_context, or one line saying how to get them."""
    try:
        from matplotlib import rc_context
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure as MplFigure
    except ImportError as err:
        raise ConfigError("report", MISSING) from err
    return MplFigure, FigureCanvasAgg, rc_context


def _errors(s: Series) -> list[list[float]] | None:
    if s.low is None or s.high is None:
        return None
    return [[max(y - lo, 0.0) for y, lo in zip(s.y, s.low, strict=True)],
            [max(hi - y, 0.0) for y, hi in zip(s.y, s.high, strict=True)]]


def _line(ax: Any, s: Series) -> str:
    """One series as a line with error bars; returns its colour."""
    if s.kind == PREDICTED:  # a prediction: dotted, its interval (an estimate) a band
        (line,) = ax.plot(s.x, s.y, linestyle=":", linewidth=1.5, label=s.label)
        if s.low is not None and s.high is not None:
            ax.fill_between(s.x, s.low, s.high, color=line.get_color(), alpha=0.15,
                            linewidth=0, label=f"{s.label}: 80% interval (estimate)")
        return line.get_color()
    hollow = s.kind != MEASURED
    # published values are points the paper states, not a curve: no line between them
    container = ax.errorbar(s.x, s.y, yerr=_errors(s), marker="s" if hollow else "o",
                            markersize=7 if hollow else 6, capsize=3,
                            linestyle="none" if hollow else "-",
                            markerfacecolor="none" if hollow else None, label=s.label)
    return container.lines[0].get_color()


def _misfit(ax: Any, s: Series, color: str) -> None:
    """'does not fit' points: an x on the x axis at their x, labelled."""
    from matplotlib.transforms import blended_transform_factory

    where = blended_transform_factory(ax.transData, ax.transAxes)
    ax.plot(s.misfit_x, [0.03] * len(s.misfit_x), linestyle="none", marker="x", markersize=9,
            markeredgewidth=2, color=color, transform=where, clip_on=False,
            label=f"{s.label}: does not fit")
    for x in s.misfit_x:
        ax.annotate("does not fit", (x, 0.03), xycoords=where, xytext=(0, 8),
                    textcoords="offset points", ha="center", fontsize=7, color=color)


def _bars(ax: Any, panel: Panel) -> None:
    """A grouped bar chart: one bar per series at each category it has."""
    n = max(len(panel.series), 1)
    width = 0.8 / n
    for k, s in enumerate(panel.series):
        xs = [x - 0.4 + width * (k + 0.5) for x in s.x]
        ax.bar(xs, s.y, width, yerr=_errors(s), capsize=3, label=s.label)
    _room_above(ax)
    ax.set_xticks(range(len(panel.categories)))
    ax.set_xticklabels(panel.categories, fontsize=7, rotation=20, ha="right")


def _axes(ax: Any, panel: Panel) -> None:
    """Draw one panel's series, axes and legend."""
    ax.set_title(panel.title, fontsize=10)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    ax.grid(True, alpha=0.3)
    drawn = [s for s in panel.series if s.x or s.misfit_x]
    if not drawn:
        ax.text(0.5, 0.5, panel.empty, ha="center", va="center", transform=ax.transAxes,
                color="0.4")
        return
    if panel.categories:
        _bars(ax, panel)
    else:
        _lines(ax, panel, drawn)
    ax.legend(fontsize=7, loc="best")


def _lines(ax: Any, panel: Panel, drawn: list[Series]) -> None:
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    for s in drawn:
        color = _line(ax, s) if s.x else ax.plot([], [])[0].get_color()
        if s.misfit_x:
            _misfit(ax, s, color)
    if panel.xlog:
        ax.set_xscale("log", base=2)
        ticks = sorted({x for s in drawn for x in (*s.x, *s.misfit_x)})
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    _room_above(ax)


def _room_above(ax: Any) -> None:
    """y from 0, with room above the highest point for its marker and the legend."""
    top = ax.get_ylim()[1]
    ax.set_ylim(0, top * 1.12 if top > 0 else 1)


def render(figure: Figure) -> tuple[bytes, str, tuple[int, int]]:
    """The figure as PNG bytes, SVG text and the PNG's size in pixels (width, height)."""
    mpl_figure, canvas_class, rc_context = _matplotlib()
    n = len(figure.panels)
    with rc_context({"svg.hashsalt": "accelbench", "font.size": 9}):
        fig = mpl_figure(figsize=(PANEL_W * n, PANEL_H), dpi=DPI, layout="constrained")
        canvas_class(fig)
        for ax, panel in zip(fig.subplots(1, n, squeeze=False)[0], figure.panels, strict=True):
            _axes(ax, panel)
        fig.suptitle(figure.title, fontsize=11)
        png, svg = io.BytesIO(), io.BytesIO()
        fig.savefig(png, format="png", metadata={"Software": None})
        fig.savefig(svg, format="svg", metadata={"Date": None})
    return png.getvalue(), svg.getvalue().decode(), (round(PANEL_W * n * DPI),
                                                     round(PANEL_H * DPI))
