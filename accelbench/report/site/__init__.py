"""`accelbench site BUNDLE... --out DIR`: a static site from many machines' bundles, needing no
server and no network (docs/exchange.md): an index of machines, a ranking page per workload
fingerprint, a page per machine, the study's figures across machines and the paper's published
figures apart. Every bundle is checked whole before a page is written (report/bundle.py)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from accelbench.config.paths import check_out_dir


@dataclass(frozen=True)
class Built:
    """What build_site wrote: the folder, its pages and the largest page's size."""

    out_dir: Path
    pages: int
    largest_bytes: int
    machines: int
    workloads: int

    @property
    def index(self) -> Path:
        """The page to open."""
        return self.out_dir / "index.html"


def _write(out_dir: Path, name: str, text: str) -> int:
    """One page, written whole then renamed into place; its size in bytes."""
    data = text.encode("utf-8")
    target = out_dir / name
    target.parent.mkdir(exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, target)
    return len(data)


def site_pages(site: object, figures: bool = True) -> dict[str, str]:
    """Every file's name (under the site's folder) and text: names made by the site, never
    from a bundle."""
    from accelbench.report.site import pages
    from accelbench.report.site.figures import FOLDER, figures_page

    made = {pages.INDEX: pages.index_page(site), pages.REFERENCE: pages.reference_page(site)}
    if figures:
        made[pages.FIGURES], svgs = figures_page(site)
        made |= {f"{FOLDER}/{name}": svg for name, svg in svgs.items()}
    else:
        made[pages.FIGURES] = pages.no_figures_page()
    for wid in site.cells:
        made[pages.workload_page_name(wid)] = pages.workload_page(site, wid)
    for m in site.machines:
        made[pages.machine_page_name(m)] = pages.machine_page(site, m)
    return made


def build_site(bundles: Sequence[Path], out_dir: Path, baseline: str | None = None,
               figures: bool = True) -> Built:
    """Read and check every bundle, then write the site into out_dir (checked first)."""
    from accelbench.report.bundle import read_bundles
    from accelbench.report.machines import pick_baseline
    from accelbench.report.site.site_model import build_model

    out_dir = check_out_dir(Path(out_dir))
    read = read_bundles([Path(p) for p in bundles])
    site = build_model(read)
    if site.machines:
        site.baseline = pick_baseline(site.machines, baseline)
    made = site_pages(site, figures)
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = {name: _write(out_dir, name, text) for name, text in made.items()}
    pages = [size for name, size in sizes.items() if name.endswith(".html")]
    return Built(out_dir, len(pages), max(pages), len(site.machines), len(site.cells))
