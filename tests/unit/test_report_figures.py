"""Every figure the report makes is legible: no two drawn texts overlap, none leaves the
figure, no legend lies over an axes' data (measured from matplotlib's own text boxes,
`get_window_extent`, report/draw.py `layout_problems`), at most two panels a row. The report
drawn here has two machines, three precisions, cells that do not fit at the same x in two
series, a scaling study, a noise check and a GAS sweep; the check is shown to fail on a figure
with overlapping texts and on one with a legend over the data."""

from __future__ import annotations

import pytest

from accelbench.report import build_report
from accelbench.report.draw import PER_ROW, draw, layout_problems, rc
from accelbench.store.store import ResultStore
from tests.unit.test_report_findings import (
    ENV,
    ESTIMATED,
    FAST,
    OTHER,
    SAME,
    _block,
    _noise,
    _scale,
    train,
)

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.slow  # draws every figure of a report, several times


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("figures")
    store = ResultStore(folder / "a.db")
    items = [_scale(), _scale(OTHER), _noise()]
    for env in (ENV, OTHER):
        items += [train(SAME, env=env, gas=1), train(SAME, env=env, gas=2),
                  train(FAST, env=env, gas=4), train(SAME, env=env, seq_len=128),
                  train(None, env=env, status="oom", reason=ESTIMATED, seq_len=512),
                  train(None, env=env, status="oom", reason=ESTIMATED, seq_len=512,
                        world_size=2, layout={"cp": 2}),
                  train(SAME, env=env, seq_len=128, world_size=2, layout={"cp": 2})]
        items += [_block(env, dtype, batch, 0.01 * batch) for dtype in ("fp32", "bf16", "fp16")
                  for batch in (1, 2, 4, 8)]
    for _, record in items:
        store.add(record)
    store.close()
    return build_report([folder / "a.db"])


def test_every_figure_of_the_report_is_legible(report):
    figures = report.figures()
    assert len(figures) >= 7
    for figure in figures:
        with rc():
            drawn = draw(figure)
            assert layout_problems(drawn) == [], figure.name
            widths = {round(ax.get_position().width, 2) for ax in drawn.axes if ax.get_visible()}
        assert drawn.get_size_inches()[0] <= 6.0 * PER_ROW  # 1200 px at 100 dpi: the page
        assert widths  # drawn


def test_the_check_fails_on_overlapping_texts_and_a_legend_over_data(report):
    figure = next(f for f in report.figures() if f.name == "fig6_gas")
    with rc():
        drawn = draw(figure)
        ax = drawn.axes[0]
        ax.text(0.5, 1.0, ax.get_title(), transform=ax.transAxes, ha="center", va="bottom")
        assert any("overlap" in p for p in layout_problems(drawn))
        drawn = draw(figure)
        drawn.axes[0].legend(loc="center")
        assert any("legend" in p for p in layout_problems(drawn))
        drawn = draw(figure)
        drawn.set_layout_engine("none")  # else the layout shrinks the axes to hold the text
        drawn.axes[0].text(3.0, 0.5, "far outside", transform=drawn.axes[0].transAxes)
        assert any("outside the figure" in p for p in layout_problems(drawn))


def test_legends_name_machines_by_their_key(report):
    labels = [s.label for f in report.figures() for p in f.panels for s in p.series]
    assert any(label.startswith("M2") for label in labels)
    assert not any("Test CPU" in label or "H100" in label for label in labels)
