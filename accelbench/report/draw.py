"""Draws a report Figure with matplotlib (the Agg canvas: no display, no pyplot state) into
PNG bytes and SVG text. matplotlib is imported here only, when drawing: the other commands
start without it.

Legible at the page's width: at most two panels a row (the page is 1200 px wide, a panel
about 600 px at 100 dpi, so text is drawn at its size), each legend beside its axes (never over
the data), a category axis drawn as horizontal bars (their names on the left, one line each),
and "does not fit" written once per x. `layout_problems` measures the drawn text boxes:
tests/unit/test_report_figures.py fails a figure whose texts overlap or leave the figure."""

from __future__ import annotations

import io
from typing import Any

from accelbench.config.errors import ConfigError
from accelbench.report.content import MEASURED, PREDICTED, Figure, Panel, Series

MISSING = "needs matplotlib (a dependency of accelbench): pip install 'matplotlib>=3.7'"
PANEL_W, PANEL_H, DPI = 6.0, 3.8, 100  # a panel with its legend, inches
PER_ROW = 2  # panels side by side; more wrap to the next row
BAR_H = 0.32  # inches a category of a bar panel takes


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
    """Error bars from the series' spread; none where any point lacks one."""
    if s.low is None or s.high is None or None in s.low or None in s.high:
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


def _misfit(ax: Any, s: Series, color: str, written: set[float]) -> None:
    """'does not fit' points: an x on the x axis at their x; the words once per x (`written`:
    the x already labelled in this panel), so two series' labels never overlap."""
    from matplotlib.transforms import blended_transform_factory

    where = blended_transform_factory(ax.transData, ax.transAxes)
    ax.plot(s.misfit_x, [0.03] * len(s.misfit_x), linestyle="none", marker="x", markersize=9,
            markeredgewidth=2, color=color, transform=where, clip_on=False,
            label=f"{s.label}: does not fit")
    for x in s.misfit_x:
        if x not in written:
            written.add(x)
            ax.annotate("does not fit", (x, 0.03), xycoords=where, xytext=(0, 8),
                        textcoords="offset points", ha="center", fontsize=7, color="0.3")


def _bars(ax: Any, panel: Panel) -> None:
    """A grouped horizontal bar chart: one bar per series at each category it has, the
    categories' names on the y axis (first at the top), the value on x (panel.xlabel)."""
    n = max(len(panel.series), 1)
    height = 0.8 / n
    for k, s in enumerate(panel.series):
        ys = [y - 0.4 + height * (k + 0.5) for y in s.x]
        ax.barh(ys, s.y, height, xerr=_errors(s), capsize=3, label=s.label)
    ax.set_yticks(range(len(panel.categories)))
    ax.set_yticklabels(panel.categories, fontsize=7)
    ax.set_ylim(len(panel.categories) - 0.5, -0.5)
    right = ax.get_xlim()[1]
    ax.set_xlim(0, right * 1.05 if right > 0 else 1)


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
        if len(drawn) > 1:  # one series: its name is the panel's title
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        return
    _lines(ax, panel, drawn)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def _lines(ax: Any, panel: Panel, drawn: list[Series]) -> None:
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    written: set[float] = set()
    for s in drawn:
        color = _line(ax, s) if s.x else ax.plot([], [])[0].get_color()
        if s.misfit_x:
            _misfit(ax, s, color, written)
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


def _size(figure: Figure) -> tuple[float, float]:
    """Inches: up to PER_ROW panels a row; a bar panel as tall as its categories need."""
    n = len(figure.panels)
    rows = -(-n // PER_ROW)
    bars = max((len(p.categories) for p in figure.panels), default=0)
    height = max(PANEL_H, BAR_H * bars + 1.6)
    return PANEL_W * min(n, PER_ROW), height * rows + 0.3


def draw(figure: Figure) -> Any:
    """The figure drawn on a matplotlib Figure with an Agg canvas (call inside rc())."""
    mpl_figure, canvas_class, _ = _matplotlib()
    n = len(figure.panels)
    fig = mpl_figure(figsize=_size(figure), dpi=DPI, layout="constrained")
    canvas_class(fig)
    grid = fig.subplots(-(-n // PER_ROW), min(n, PER_ROW), squeeze=False).flatten()
    for ax, panel in zip(grid, figure.panels, strict=False):
        _axes(ax, panel)
    for ax in grid[n:]:
        ax.set_visible(False)
    fig.suptitle(figure.title, fontsize=11)
    return fig


def rc() -> Any:
    """The drawing's matplotlib settings (a context manager)."""
    _, _, rc_context = _matplotlib()
    return rc_context({"svg.hashsalt": "accelbench", "font.size": 9})


def render(figure: Figure) -> tuple[bytes, str, tuple[int, int]]:
    """The figure as PNG bytes, SVG text and the PNG's size in pixels (width, height)."""
    with rc():
        fig = draw(figure)
        png, svg = io.BytesIO(), io.BytesIO()
        fig.savefig(png, format="png", metadata={"Software": None})
        fig.savefig(svg, format="svg", metadata={"Date": None})
    width, height = _size(figure)
    return png.getvalue(), svg.getvalue().decode(), (round(width * DPI), round(height * DPI))


def _tick_labels(ax: Any) -> tuple[set[int], list[Any]]:
    """Every tick label of an axes (by id), and those drawn: a tick within the axis' view."""
    every, drawn = set(), []
    for axis in (ax.xaxis, ax.yaxis):
        low, high = sorted(axis.get_view_interval())
        span = (high - low) * 1e-9
        for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks()):
            labels = (tick.label1, tick.label2)
            every |= {id(t) for t in labels}
            if low - span <= tick.get_loc() <= high + span:
                drawn += [t for t in labels if t.get_visible()]
    return every, drawn


def _texts(fig: Any) -> list[Any]:
    """Every text the figure draws (titles, labels, the ticks within view, legends,
    annotations), visible and not empty."""
    from matplotlib.text import Text

    ticks, drawn = set(), []
    for ax in fig.axes:
        if ax.get_visible():
            every, shown = _tick_labels(ax)
            ticks |= every
            drawn += shown
    others = [t for t in fig.findobj(Text) if id(t) not in ticks]
    return [t for t in others + drawn if t.get_visible() and t.get_text().strip()
            and (t.axes is None or t.axes.get_visible())]


def layout_problems(fig: Any) -> list[str]:
    """What makes a drawn figure hard to read: two texts whose boxes overlap, a text outside
    the figure, a legend over an axes' data area. Empty when none (draws the figure first)."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    whole = fig.bbox
    texts = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(fig)]
    problems = [f"text {s!r} outside the figure" for s, b in texts
                if b.x0 < whole.x0 - 1 or b.y0 < whole.y0 - 1 or b.x1 > whole.x1 + 1
                or b.y1 > whole.y1 + 1]
    for i, (a, box) in enumerate(texts):
        problems += [f"texts {a!r} and {b!r} overlap" for b, other in texts[i + 1:]
                     if _overlap(box, other)]
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None and ax.get_visible():
            for other in fig.axes:
                if other.get_visible() and _overlap(legend.get_window_extent(renderer),
                                                    other.get_window_extent(renderer)):
                    problems.append(f"legend of {ax.get_title()!r} over the axes of "
                                    f"{other.get_title()!r}")
    return problems


def _overlap(a: Any, b: Any, slack: float = 1.0) -> bool:
    """Whether two boxes (pixels) overlap by more than `slack` pixels each way."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > slack
            and min(a.y1, b.y1) - max(a.y0, b.y0) > slack)
