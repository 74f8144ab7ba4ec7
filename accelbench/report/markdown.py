"""The report as Markdown: report.md (findings first, each table's headline rows, the methods
last; figures linked as relative PNG files) and appendix.md (every table in full, and what each
section reads), for a reader on a forge or in an editor."""

from __future__ import annotations

from accelbench.report.content import Report, Section, Table

APPENDIX = "appendix.md"  # beside report.md: the full tables
FIGURES = "figures"  # the folder, under the output folder, of the PNG and SVG files


def anchor(*parts: str) -> str:
    """An id for a table or section: 'block-block-cells'."""
    text = "-".join(parts).lower()
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


def md_cell(text: object) -> str:
    """A cell's text, its pipes escaped and on one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_rows(header: tuple[str, ...], rows: tuple[tuple[str, ...], ...]) -> list[str]:
    """A pipe table."""
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]


def _table(table: Table, section: str) -> str:
    """The headline rows, the caption, and where the full table is (a table with no headline
    rows: its title and caption, and the link)."""
    header, rows, same = table.compact()
    notes = [n for n in (table.caption, same if table.shown else "") if n]
    if table.folded:
        notes.append(f"All {len(table.rows)} rows: [{APPENDIX}]({APPENDIX}#"
                     f"{anchor(section, table.title)}).")
    note = md_cell(" ".join(notes))
    if not table.shown:
        return f"**{md_cell(table.title)}**: _{note}_"
    lines = [f"**{md_cell(table.title)}**", "", *md_rows(header, rows)]
    return "\n".join(lines + (["", f"_{note}_"] if note else []))


def _section(section: Section) -> str:
    parts = [f'<a id="{section.key}"></a>\n\n## {section.title}', *section.paragraphs]
    for f in section.figures:
        parts += [f"![{f.title}]({FIGURES}/{f.name}.png)",
                  f"_{f.caption}_ ([SVG]({FIGURES}/{f.name}.svg))"]
    parts += [_table(t, section.key) for t in section.tables]
    return "\n\n".join(parts)


def _methods(report: Report) -> str:
    """Shared terms once, then each section's own notes (its figures' and tables')."""
    parts = ['<a id="methods"></a>\n\n## Methods']
    parts += [f"- **{term}**: {text}" for term, text in report.terms]
    parts += [f"**{title}.** {text}" for title, text in report.methods()]
    parts.append(f"What each section reads from the records: [{APPENDIX}]({APPENDIX}).")
    return "\n\n".join(parts)


def _findings(report: Report) -> str:
    lines = [f"- {f.text} ([{f.section}](#{f.section}))" for f in report.findings]
    return "## Findings\n\n" + ("\n".join(lines) or "- No experiment has records yet.")


def to_markdown(report: Report) -> str:
    """report.md: the findings, the sections with their headline rows, the methods."""
    return "\n\n".join([f"# {report.title}", *report.intro, _findings(report),
                        *(_section(s) for s in report.sections), _methods(report)]) + "\n"


def to_appendix(report: Report) -> str:
    """appendix.md: every table in full, and what each section reads."""
    parts = [f"# {report.title}: appendix", "Every table in full (report.md shows each "
             "table's headline rows), and what each section reads."]
    for s in report.sections:
        parts += [f"## {s.title}", f"Reads: {s.source}"]
        for t in s.tables:
            lines = [f'<a id="{anchor(s.key, t.title)}"></a>', "", f"**{md_cell(t.title)}**",
                     "", *md_rows(t.header, t.rows)]
            parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
