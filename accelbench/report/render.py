"""Writes a report: report.html (self-contained: figures embedded as base64 PNG, inline CSS,
no network access needed), report.md (the same content, figures linked as relative PNG
files) and every figure as PNG and SVG under figures/."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

from accelbench.report.content import Figure, Report, Section, Table
from accelbench.report.draw import render

FIGURES = "figures"  # the folder, under the output folder, of the PNG and SVG files

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1200px; padding: 0 1rem; color: #1b1b1b; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { border-bottom: 1px solid #ccc; padding-top: 1rem; }
p.source { color: #555; font-size: 0.9rem; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9rem; color: #333; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } caption { caption-side: top; text-align: left; font-weight: 600; }
p.tablenote { font-size: 0.85rem; color: #555; margin-top: -1.2rem; }
nav ul { columns: 2; }
"""

# Sets data-images on <body> once the page has loaded: "ok" when every image has decoded
# (complete, naturalWidth > 0), else "broken"; data-images-drawn counts them. A browser test
# reads it back from the DOM.
_IMAGE_CHECK = """
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var drawn = images.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.setAttribute("data-images-drawn", drawn.length + "/" + images.length);
  document.body.setAttribute("data-images", drawn.length === images.length ? "ok" : "broken");
});
"""


@dataclass(frozen=True)
class Drawn:
    """A figure drawn: its PNG and SVG, and the PNG's size."""

    figure: Figure
    png: bytes
    svg: str
    size: tuple[int, int]


@dataclass(frozen=True)
class Written:
    """What write_report wrote."""

    html: Path
    markdown: Path
    pngs: tuple[Path, ...]
    svgs: tuple[Path, ...]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>"
                   for row in table.rows)
    note = f'<p class="tablenote">{_e(table.caption)}</p>' if table.caption else ""
    return (f"<table><caption>{_e(table.title)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>{note}")


def _html_figure(d: Drawn) -> str:
    data = base64.b64encode(d.png).decode("ascii")
    name = d.figure.name
    return (f'<figure id="{_e(name)}"><img src="data:image/png;base64,{data}" '
            f'width="{d.size[0]}" height="{d.size[1]}" alt="{_e(d.figure.title)}">'
            f"<figcaption>{_e(d.figure.caption)} (Also beside this file: {FIGURES}/{_e(name)}"
            f".png and .svg.)</figcaption></figure>")


def _html_section(section: Section, drawn: dict[str, Drawn]) -> str:
    parts = [f'<section id="{_e(section.key)}"><h2>{_e(section.title)}</h2>',
             f'<p class="source">Reads: {_e(section.source)}</p>']
    parts += [f"<p>{_e(p)}</p>" for p in section.paragraphs]
    parts += [_html_figure(drawn[f.name]) for f in section.figures]
    parts += [_html_table(t) for t in section.tables]
    return "\n".join(parts) + "</section>"


def to_html(report: Report, drawn: dict[str, Drawn]) -> str:
    """The whole page: nothing outside it is loaded (no links to styles, scripts or fonts)."""
    toc = "".join(f'<li><a href="#{_e(s.key)}">{_e(s.title)}</a></li>' for s in report.sections)
    intro = "".join(f"<p>{_e(p)}</p>" for p in report.intro)
    body = "\n".join(_html_section(s, drawn) for s in report.sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(report.title)}</title><style>{_CSS}</style></head>\n"
            f'<body data-images="pending"><h1>{_e(report.title)}</h1>{intro}'
            f"<nav><ul>{toc}</ul></nav>\n{body}\n<script>{_IMAGE_CHECK}</script></body></html>\n")


def _md_cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> str:
    lines = [f"**{_md_cell(table.title)}**", "",
             "| " + " | ".join(_md_cell(h) for h in table.header) + " |",
             "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    if table.caption:
        lines += ["", f"_{_md_cell(table.caption)}_"]
    return "\n".join(lines)


def _md_section(section: Section) -> str:
    parts = [f"## {section.title}", f"Reads: {section.source}"]
    parts += list(section.paragraphs)
    for f in section.figures:
        parts += [f"![{f.title}]({FIGURES}/{f.name}.png)",
                  f"_{f.caption}_ (SVG: [{FIGURES}/{f.name}.svg]({FIGURES}/{f.name}.svg))"]
    parts += [_md_table(t) for t in section.tables]
    return "\n\n".join(parts)


def to_markdown(report: Report) -> str:
    """The same content as the page, figures linked as relative PNG files."""
    toc = "\n".join(f"- [{s.title}](#{s.key})" for s in report.sections)
    return "\n\n".join([f"# {report.title}", *report.intro, toc,
                        *(_md_section(s) for s in report.sections)]) + "\n"


def write_report(report: Report, out_dir: Path) -> Written:
    """Draw every figure, then write the PNG and SVG files, report.html and report.md."""
    drawn = {}
    for figure in report.figures():
        png, svg, size = render(figure)
        drawn[figure.name] = Drawn(figure, png, svg, size)
    folder = Path(out_dir) / FIGURES
    folder.mkdir(parents=True, exist_ok=True)
    pngs, svgs = [], []
    for name, d in drawn.items():
        pngs.append(folder / f"{name}.png")
        pngs[-1].write_bytes(d.png)
        svgs.append(folder / f"{name}.svg")
        svgs[-1].write_text(d.svg)
    page, markdown = Path(out_dir) / "report.html", Path(out_dir) / "report.md"
    page.write_text(to_html(report, drawn))
    markdown.write_text(to_markdown(report))
    return Written(page, markdown, tuple(pngs), tuple(svgs))
