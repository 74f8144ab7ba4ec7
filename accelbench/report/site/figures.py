"""The study's figures across machines, drawn by the report's own code: each registered
workload's report section (its declared `sections`: the paper's figures 3, 4, 6, 7 and tables)
and the comparison's figure, built over the site's machines and drawn by report/draw.py to SVG
files beside the page. A figure's legend holds a few machines, so the figures show at most
FIGURE_MACHINES of them (the baseline, then those with the most ranked cells), and say so."""

from __future__ import annotations

from accelbench.report.content import Figure
from accelbench.report.machines import Machine
from accelbench.report.site.html import esc, page, paragraph
from accelbench.report.site.pages import NAV
from accelbench.report.site.site_model import Site

FIGURE_MACHINES = 6
COMPARE_CATEGORIES = 12  # the comparison's bars are drawn for at most this many workloads
FOLDER = "figures"  # beside the pages: each figure one SVG file


def chosen_machines(site: Site) -> list[Machine]:
    """The machines drawn: the baseline first, then those with the most ranked cells."""
    counts = {m.key: len(site.machine_cells(m)) for m in site.machines}
    order = sorted(site.machines, key=lambda m: (-counts[m.key], m.index))
    if site.baseline is not None:
        order = [site.baseline] + [m for m in order if m.key != site.baseline.key]
    return order[:FIGURE_MACHINES]


def study_figures(machines: list[Machine], base: Machine | None) -> list[Figure]:
    """Every figure the report draws for these machines (its sections, then the comparison)."""
    from accelbench.config.workload import report_sections
    from accelbench.report.compare import best_cells, compare_figure

    figures = [f for section in report_sections() for f in section(machines).figures]
    best = best_cells(machines)
    if best and base is not None and len(best) <= COMPARE_CATEGORIES:
        figures.append(compare_figure(best, machines, base))
    return figures


def figures_page(site: Site) -> tuple[str, dict[str, str]]:
    """The study's figures for the chosen machines, each with its caption: the page, and each
    figure's SVG by its file name under FOLDER (names from the report's figure names)."""
    from accelbench.report.draw import render

    machines = chosen_machines(site)
    if not machines:
        return page("Figures", paragraph("No machines."), NAV), {}
    base = site.baseline if site.baseline in machines else machines[0]
    parts = [paragraph(f"The study's figures, drawn by accelbench's report over "
                       f"{len(machines)} of {len(site.machines)} machine(s): "
                       + "; ".join(f"M{m.index} {m.name}" for m in machines)
                       + f". At most {FIGURE_MACHINES} are drawn (the baseline, then those with "
                       "the most ranked cells); every machine is ranked on the workload pages.")]
    files = {}
    for n, figure in enumerate(study_figures(machines, base)):
        if not any(s.x or s.misfit_x for p in figure.panels for s in p.series):
            continue
        name = f"figure{n:02d}.svg"  # numbered here: no name from a record is a file name
        files[name] = render(figure)[1]
        parts.append(f'<figure><img src="{FOLDER}/{name}" alt="{esc(figure.title)}">'
                     f"<figcaption>{esc(figure.title)}: {esc(figure.caption)}</figcaption>"
                     "</figure>")
    return page("Figures across machines", "\n".join(parts), NAV), files
