"""Screenshots of a written report in headless Chromium, as a reader sees it: the first screen
(1280 x 800) and each figure with its caption, cut from a screenshot of the whole page at the
same width, for docs/examples/ and for checking a report by eye.

    python scripts/report_screenshots.py accelbench-report/report.html docs/examples/x/screens

Needs chromium (Debian: apt-get install -y chromium); prints each file written, one a line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--virtual-time-budget=10000")
WIDTH, FIRST_SCREEN = 1280, 800


def shoot(chromium: str, url: str, out: Path, height: int) -> None:
    """One screenshot of `url` in a window WIDTH x height, a fresh profile each time."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={out}",
                        f"--window-size={WIDTH},{height}", url], check=True,
                       capture_output=True, timeout=180)


# Added to a copy of the page: each figure's box and the page's height, read back from the DOM.
MEASURE = """<script>window.addEventListener("load", function () {
  document.querySelectorAll("figure").forEach(function (f) {
    var r = f.getBoundingClientRect();
    f.setAttribute("data-box", [r.left, r.top + window.scrollY, r.width, r.height]
                   .map(Math.round).join(","));
  });
  document.body.setAttribute("data-height", document.documentElement.scrollHeight);
});</script></body>"""


def boxes(chromium: str, page: Path) -> tuple[dict[str, tuple[int, ...]], int]:
    """Each figure's box (left, top, width, height) and the page's height, at WIDTH."""
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "page.html"
        copy.write_text(page.read_text().replace("</body>", MEASURE, 1))
        dom = subprocess.run([chromium, *FLAGS, f"--user-data-dir={folder}/p",
                              f"--window-size={WIDTH},{FIRST_SCREEN}", "--dump-dom",
                              copy.as_uri()], check=True, capture_output=True, text=True,
                             timeout=180).stdout
    found = re.findall(r'<figure id="([^"]+)" data-box="([\d,]+)"', dom)
    height = int(re.search(r'data-height="(\d+)"', dom).group(1))
    return {name: tuple(int(v) for v in box.split(",")) for name, box in found}, height


def main(page: Path, out_dir: Path) -> None:
    from matplotlib.image import imread, imsave

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("needs chromium: apt-get install -y chromium")
    out_dir.mkdir(parents=True, exist_ok=True)
    first = out_dir / "first-screen.png"
    shoot(chromium, page.resolve().as_uri(), first, FIRST_SCREEN)
    print(first)
    found, height = boxes(chromium, page)
    with tempfile.TemporaryDirectory() as folder:
        whole = Path(folder) / "whole.png"
        shoot(chromium, page.resolve().as_uri(), whole, height)
        pixels = imread(whole)
    for name, (left, top, width, tall) in found.items():
        shot = out_dir / f"figure-{name}.png"
        imsave(shot, pixels[top:top + tall, left:left + width])
        print(shot)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
