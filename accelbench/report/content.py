"""What a report holds, before it is drawn or written: sections of paragraphs, tables and
figures, each figure a list of panels of series. Plain data, no matplotlib: the sections are
built (and tested) without it; draw.py turns a Figure into PNG and SVG, render.py writes HTML
and Markdown."""

from __future__ import annotations

from dataclasses import dataclass

MEASURED, PUBLISHED, PREDICTED = "measured", "published", "predicted"  # how a series is drawn


@dataclass(frozen=True)
class Table:
    """A table of text cells; the caption says where its numbers come from."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class Series:
    """One line of a panel: y over x, with the spread of repeated measurements (low and high
    y, drawn as error bars; of a prediction, its 80% interval, drawn as a band) and the x
    where the cell does not fit (status oom)."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None
    kind: str = MEASURED
    misfit_x: tuple[float, ...] = ()


@dataclass(frozen=True)
class Panel:
    """One set of axes; `empty` is the text drawn when it has no series. With `categories`
    it is a grouped bar chart: each series' x are indices into them, one bar per series."""

    title: str
    xlabel: str
    ylabel: str
    series: tuple[Series, ...]
    xlog: bool = False
    empty: str = "no records"
    categories: tuple[str, ...] = ()


@dataclass(frozen=True)
class Figure:
    """A figure of one or more panels side by side; `name` is its file stem."""

    name: str
    title: str
    panels: tuple[Panel, ...]
    caption: str


@dataclass(frozen=True)
class Section:
    """One part of the report: what it reads (`source`), then text, figures and tables."""

    key: str
    title: str
    source: str
    paragraphs: tuple[str, ...] = ()
    figures: tuple[Figure, ...] = ()
    tables: tuple[Table, ...] = ()


@dataclass(frozen=True)
class Report:
    """The whole report, in the order it is written."""

    title: str
    intro: tuple[str, ...]
    sections: tuple[Section, ...]

    def figures(self) -> list[Figure]:
        """Every figure, in order."""
        return [f for s in self.sections for f in s.figures]
