"""Writes a report: report.html (self-contained: figures embedded as base64 PNG, inline CSS,
no network access needed; each long table's full rows folded under its headline rows),
report.md with appendix.md (markdown.py: the same content, the full tables in the appendix,
figures linked as relative PNG files) and every figure as PNG and SVG under figures/."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

from accelbench.report.content import Figure, Report, Section, Table
from accelbench.report.draw import render
from accelbench.report.markdown import APPENDIX, FIGURES, to_appendix, to_markdown

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1200px; padding: 0 1rem; color: #1b1b1b; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { border-bottom: 1px solid #ccc; padding-top: 1rem; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9rem; color: #333; }
div.scroll { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
th { background: #f3f3f3; } caption { caption-side: top; text-align: left; font-weight: 600; }
p.tablenote { font-size: 0.85rem; color: #555; margin-top: -0.5rem; }
ul.findings li { margin: 0.2rem 0; } nav { font-size: 0.9rem; margin: 1rem 0; }
details { margin: 0 0 1.5rem; } summary { cursor: pointer; color: #235; }
dt { font-weight: 600; } dd { margin: 0 0 0.5rem 1rem; }
p, li, dd, figcaption, summary { overflow-wrap: anywhere; }
"""

# Sets data-images on <body> once the page has loaded: "ok" when every image has decoded
# (complete, naturalWidth > 0), else "broken"; data-images-drawn counts them. data-overflow:
# "none" when nothing makes the page wider than the window, else the elements that stick out
# past its right edge (tag#id.class), outside any container that scrolls them itself. A
# browser test reads both back from the DOM.
_IMAGE_CHECK = """
function scrolls(e) {
  for (var p = e.parentElement; p; p = p.parentElement) {
    var x = getComputedStyle(p).overflowX;
    if (x === "auto" || x === "scroll" || x === "hidden") { return true; }
  }
  return false;
}
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var drawn = images.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.setAttribute("data-images-drawn", drawn.length + "/" + images.length);
  document.body.setAttribute("data-images", drawn.length === images.length ? "ok" : "broken");
  var width = document.documentElement.clientWidth, wide = [];
  document.querySelectorAll("body *").forEach(function (e) {
    if (e.getBoundingClientRect().right > width + 1 && !scrolls(e)) {
      wide.push(e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
                (e.className ? "." + e.className : ""));
    }
  });
  if (document.documentElement.scrollWidth > width + 1 && !wide.length) { wide.push("page"); }
  document.body.setAttribute("data-overflow", wide.length ? wide.slice(0, 5).join(" ") : "none");
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
    appendix: Path | None = None  # the full tables (appendix.md)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _rows_html(header: tuple[str, ...], rows: tuple[tuple[str, ...], ...]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody>"


def _html_table(table: Table) -> str:
    """The headline rows; the full table folded below them (details) when there are more (a
    table with no headline rows: its title and caption, the rows folded)."""
    header, rows, same = table.compact()
    said = " ".join(n for n in (table.caption, same if table.shown else "") if n)
    if not table.shown:
        shown, note = "", f'<p class="tablenote"><b>{_e(table.title)}</b>: {_e(said)}</p>'
    else:
        shown = (f'<div class="scroll"><table><caption>{_e(table.title)}</caption>'
                 f"{_rows_html(header, rows)}</table></div>")
        note = f'<p class="tablenote">{_e(said)}</p>' if said else ""
    if not table.folded:
        return shown + note
    full = (f'<details><summary>All {len(table.rows)} rows of "{_e(table.title)}"</summary>'
            f'<div class="scroll"><table>{_rows_html(table.header, table.rows)}</table></div>'
            "</details>")
    return shown + note + full


def _html_figure(d: Drawn) -> str:
    data = base64.b64encode(d.png).decode("ascii")
    name = d.figure.name
    return (f'<figure id="{_e(name)}"><img src="data:image/png;base64,{data}" '
            f'width="{d.size[0]}" height="{d.size[1]}" alt="{_e(d.figure.title)}">'
            f"<figcaption>{_e(d.figure.caption)}</figcaption></figure>")


def _html_section(section: Section, drawn: dict[str, Drawn]) -> str:
    parts = [f'<section id="{_e(section.key)}"><h2>{_e(section.title)}</h2>']
    parts += [f"<p>{_e(p)}</p>" for p in section.paragraphs]
    parts += [_html_figure(drawn[f.name]) for f in section.figures]
    parts += [_html_table(t) for t in section.tables]
    return "\n".join(parts) + "</section>"


def _html_findings(report: Report) -> str:
    titles = {s.key: s.title for s in report.sections}
    items = "".join(f'<li>{_e(f.text)} <a href="#{_e(f.section)}">'
                    f"{_e(titles.get(f.section, f.section))}</a></li>"
                    for f in report.findings) or "<li>No experiment has records yet.</li>"
    return f'<section id="findings"><h2>Findings</h2><ul class="findings">{items}</ul></section>'


def _html_methods(report: Report) -> str:
    """Shared terms once, each section's notes, and (folded) what each section reads."""
    terms = "".join(f"<dt>{_e(t)}</dt><dd>{_e(d)}</dd>" for t, d in report.terms)
    parts = ['<section id="methods"><h2>Methods</h2>', f"<dl>{terms}</dl>" if terms else ""]
    parts += [f"<p><b>{_e(title)}.</b> {_e(text)}</p>" for title, text in report.methods()]
    reads = "".join(f"<li>{_e(s.title)}: {_e(s.source)}</li>" for s in report.sections)
    parts.append(f"<details><summary>What each section reads</summary><ul>{reads}</ul>"
                 "</details></section>")
    return "\n".join(parts)


def to_html(report: Report, drawn: dict[str, Drawn]) -> str:
    """The whole page: nothing outside it is loaded (no links to styles, scripts or fonts)."""
    toc = " · ".join(f'<a href="#{_e(s.key)}">{_e(s.title)}</a>'
                     for s in (*report.sections, Section("methods", "Methods", "")))
    intro = "".join(f"<p>{_e(p)}</p>" for p in report.intro)
    body = "\n".join(_html_section(s, drawn) for s in report.sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(report.title)}</title><style>{_CSS}</style></head>\n"
            f'<body data-images="pending"><h1>{_e(report.title)}</h1>{intro}'
            f"{_html_findings(report)}<nav>{toc}</nav>\n{body}\n{_html_methods(report)}\n"
            f"<script>{_IMAGE_CHECK}</script></body></html>\n")


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
    appendix = Path(out_dir) / APPENDIX
    page.write_text(to_html(report, drawn))
    markdown.write_text(to_markdown(report))
    appendix.write_text(to_appendix(report))
    return Written(page, markdown, tuple(pngs), tuple(svgs), appendix)
