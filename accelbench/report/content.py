"""What a report holds, before it is drawn or written: its findings first (a line per experiment
that ran), then sections of paragraphs, tables and figures, each figure a list of panels of
series, and the methods last. Plain data, no matplotlib: the sections are built (and tested)
without it; draw.py turns a Figure into PNG and SVG, render.py writes HTML and Markdown.

A caption says what a reader sees in at most two sentences; how it was made (what a table reads,
how its intervals are computed) is its `method`, written once in the Methods section at the end."""

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
    method: str = ""  # how its numbers were made: the Methods section's
    headline: tuple[int, ...] | None = None  # the rows shown by default; None: every row

    @property
    def shown(self) -> tuple[tuple[str, ...], ...]:
        """The rows shown by default (the headline's, else every row)."""
        if self.headline is None:
            return self.rows
        return tuple(self.rows[i] for i in self.headline)

    @property
    def folded(self) -> bool:
        """Whether the full table is kept apart (HTML details, the Markdown appendix)."""
        return len(self.shown) < len(self.rows)

    def compact(self) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...], str]:
        """The shown rows without the columns every row of the table has the same value in,
        and those values said once ('Every row: machine M1; precision fp32.'); a table of one
        row, or whose columns all vary, as it is. Nothing is lost: each value is said once."""
        if len(self.rows) < 2:
            return self.header, self.shown, ""
        same = [i for i in range(len(self.header)) if len({r[i] for r in self.rows}) == 1]
        if not same or len(same) == len(self.header):
            return self.header, self.shown, ""
        keep = [i for i in range(len(self.header)) if i not in same]
        said = "; ".join(f"{self.header[i]} {self.rows[0][i]}" for i in same)
        return (tuple(self.header[i] for i in keep),
                tuple(tuple(r[i] for i in keep) for r in self.shown), f"Every row: {said}.")


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
    method: str = ""  # how it was drawn: the Methods section's


@dataclass(frozen=True)
class Finding:
    """One line of the report's opening: what an experiment found, with its figure, interval and
    verdict in plain words; `section` is the key of the section that shows it."""

    text: str
    section: str


@dataclass(frozen=True)
class Section:
    """One part of the report: text, figures and tables; what it reads (`source`) and its
    `methods` go to the Methods section, its `findings` to the opening."""

    key: str
    title: str
    source: str
    paragraphs: tuple[str, ...] = ()
    figures: tuple[Figure, ...] = ()
    tables: tuple[Table, ...] = ()
    findings: tuple[Finding, ...] = ()
    methods: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    """The whole report, in the order it is written."""

    title: str
    intro: tuple[str, ...]
    sections: tuple[Section, ...]
    terms: tuple[tuple[str, str], ...] = ()  # the Methods section's shared definitions

    @property
    def findings(self) -> list[Finding]:
        """Every section's findings, in section order."""
        return [f for s in self.sections for f in s.findings]

    def methods(self) -> list[tuple[str, str]]:
        """(section title, its notes) for the Methods section: the section's own, then each
        figure's and table's, a note said before named by where it was said."""
        said: dict[str, str] = {}
        out = []
        for s in self.sections:
            notes = [(s.title, m) for m in s.methods]
            notes += [(x.title, x.method) for x in (*s.figures, *s.tables) if x.method]
            text = []
            for where, note in notes:
                if note in said:
                    text.append(f"{where}: as {said[note]}.")
                else:
                    said[note] = where
                    text.append(note if where == s.title else f"{where}: {note}")
            if text:
                out.append((s.title, " ".join(text)))
        return out

    def tables(self) -> list[Table]:
        """Every table, in order."""
        return [t for s in self.sections for t in s.tables]

    def figures(self) -> list[Figure]:
        """Every figure, in order."""
        return [f for s in self.sections for f in s.figures]
