"""The site's HTML: one page shell (inline CSS and script, a content security policy that lets
the page load nothing from anywhere: no server, no network), tables that sort and filter in the
page, and every text escaped (html.escape): markup or a script in any record field is shown as
text, never run."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

# Nothing is fetched from elsewhere: no default source, scripts and styles only inline, images
# only the site's own files (its figures) or data: URIs, links only to the site's own pages.
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src 'self' data: file:; base-uri 'none'; form-action 'none'")

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem auto;
       max-width: 1400px; padding: 0 1rem; color: #1b1b1b; line-height: 1.4; }
h1 { font-size: 1.5rem; } h2 { border-bottom: 1px solid #ccc; padding-top: .8rem; }
table { border-collapse: collapse; margin: .4rem 0 1.2rem; font-size: .82rem; }
th, td { border: 1px solid #ccc; padding: .15rem .45rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; cursor: pointer; user-select: none; }
th[data-dir="asc"]::after { content: " \\25B2"; } th[data-dir="desc"]::after { content: " \\25BC"; }
p.note { font-size: .85rem; color: #444; } nav a { margin-right: 1rem; }
input.filter { margin: .2rem 0; padding: .15rem .3rem; width: 22rem; }
span.mark { display: inline-block; border-radius: 3px; padding: 0 .3rem; margin: 0 .15rem .1rem 0;
            font-size: .75rem; background: #eee; white-space: nowrap; }
span.reproduced { background: #d4f0d4; } span.once { background: #eee; }
span.disagrees, span.disturbance, span.noisy { background: #f8d7a8; }
span.estimated { background: #dde4f8; } span.reference { background: #efe0f5; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; }
"""

# Sorting and filtering, in the page. A cell's data-v (a number) sorts numerically, else its
# text does; a filter keeps the rows whose text holds every word typed. The URL's fragment
# (#sort=TABLE:COLUMN:asc|desc&filter=TABLE:words) applies the same actions on load, so a
# headless browser can check them with no clicks.
SCRIPT = """
(function () {
  function key(td) { var v = td.getAttribute("data-v");
    return v === null ? td.textContent.trim().toLowerCase() : parseFloat(v); }
  function sortTable(table, col, dir) {
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) { var x = key(a.cells[col]), y = key(b.cells[col]);
      var c = (typeof x === "number" && typeof y === "number") ? x - y
              : String(x).localeCompare(String(y));
      return dir === "desc" ? -c : c; });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      if (i === col) { th.setAttribute("data-dir", dir); } else { th.removeAttribute("data-dir"); }
    });
  }
  function filterTable(table, text) {
    var words = text.toLowerCase().split(/\\s+/).filter(Boolean), shown = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      var t = r.textContent.toLowerCase();
      var keep = words.every(function (w) { return t.indexOf(w) >= 0; });
      r.style.display = keep ? "" : "none"; if (keep) { shown += 1; } });
    table.setAttribute("data-shown", String(shown));
  }
  function wire(table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.addEventListener("click", function () {
        sortTable(table, i, th.getAttribute("data-dir") === "asc" ? "desc" : "asc"); }); });
    var box = document.getElementById(table.id + "-filter");
    if (box) { box.addEventListener("input", function () { filterTable(table, box.value); }); }
  }
  function fromFragment() {
    decodeURIComponent(location.hash.slice(1)).split("&").forEach(function (part) {
      var kv = part.split("="), args = (kv[1] || "").split(":");
      var table = document.getElementById(args[0]);
      if (!table) { return; }
      if (kv[0] === "sort") { sortTable(table, parseInt(args[1], 10), args[2] || "asc"); }
      if (kv[0] === "filter") { var box = document.getElementById(args[0] + "-filter"),
          words = args.slice(1).join(":");
        if (box) { box.value = words; } filterTable(table, words); }
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), wire);
    fromFragment();
    document.body.setAttribute("data-ready", "yes");
  });
})();
"""


def esc(text: object) -> str:
    """Any value as HTML text (quotes too): never markup."""
    return html.escape(str(text), quote=True)


@dataclass(frozen=True)
class Cell:
    """A table cell: its text (escaped when written) or trusted markup made here (`markup`),
    and a number it sorts by."""

    text: str = ""
    sort: float | None = None
    markup: str | None = None

    def html(self) -> str:
        """<td>...</td>."""
        v = "" if self.sort is None else f' data-v="{self.sort!r}"'
        return f"<td{v}>{self.markup if self.markup is not None else esc(self.text)}</td>"


def link(href: str, text: object) -> str:
    """A link to one of the site's own pages (href made by the site, never read from a file)."""
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def table(table_id: str, header: Sequence[str], rows: Sequence[Sequence[Cell | str]],
          caption: str = "") -> str:
    """A sortable, filterable table; a plain string cell is text."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "\n".join("<tr>" + "".join((c if isinstance(c, Cell) else Cell(str(c))).html()
                                      for c in row) + "</tr>" for row in rows)
    note = f'<p class="note">{esc(caption)}</p>' if caption else ""
    return (f'<input class="filter" id="{table_id}-filter" placeholder="filter rows">'
            f'<table class="sortable" id="{table_id}"><thead><tr>{head}</tr></thead>'
            f"<tbody>\n{body}\n</tbody></table>{note}")


def paragraph(text: str) -> str:
    """A paragraph of text."""
    return f"<p>{esc(text)}</p>"


def page(title: str, body: str, nav: Sequence[tuple[str, str]] = ()) -> str:
    """A whole page: no external resource, nothing fetched."""
    links = " ".join(link(href, text) for href, text in nav)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style><script>{SCRIPT}</script>"
            f"</head><body><nav>{links}</nav><h1>{esc(title)}</h1>\n{body}\n</body></html>\n")
