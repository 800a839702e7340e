"""Every figure in docs/repro/, drawn again from its CSV by the plot code of this tree,
and checked for what an eye would catch: a label cut off at the figure's edge, tick
labels or annotations drawn over each other, a legend over the data, "us" where the
figures write "µs", and axes whose scale does not suit their values (a linear axis
over three decades flattens every curve under the largest; a log axis over less than
one shows two ticks). `python/plot.py` draws the same way for `rocast sim`."""

import glob
import importlib
import os
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402

import rocast  # noqa: E402
from rocast.plot._cli import sibling  # noqa: E402
from rocast.plot.titles import repro_title  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIGURES = sorted(glob.glob(str(REPO / "docs" / "repro" / "*" / "*.png")))


def draw(png):
    """The figure of `png`, drawn from the CSV beside it as `rocast sim` draws it."""
    stem = Path(png).stem
    csv = str(Path(png).with_suffix(".csv"))
    # bcast.csv is drawn by `rocast bcast --plot`, the rest by the experiment registry.
    name = "bcast" if stem == "bcast" else rocast._lib().figure_for_table(stem)
    assert name is not None, f"{png}: no figure draws {stem}.csv"
    module = importlib.import_module(f"rocast.plot.{name}")
    extra = {}
    if getattr(module, "SIBLING", None):
        extra[module.SIBLING] = sibling(csv, module.SIBLING)
    fig = module.draw(pd.read_csv(csv), repro_title(Path(png).parent), plt, **extra)
    fig.tight_layout()
    fig.canvas.draw()
    return fig


def drawn_texts(fig):
    """The texts the figure shows: titles, axis labels, legends, annotations, and the
    tick labels of ticks inside the axes' limits (matplotlib lays out a tick or two
    beyond them and does not draw them)."""
    ticks = set()
    for ax in fig.axes:
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = min(lim), max(lim)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo <= tick.get_loc() <= hi:
                    ticks.add(id(tick.label1))
                    ticks.add(id(tick.label2))
    return [t for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and id(t) not in ticks]


def data_values(ax, axis):
    """The values drawn on `axis` ("x"/"y") of `ax`: lines, bars' ends, scatter points."""
    k = 0 if axis == "x" else 1
    vals = [np.asarray(l.get_xydata(), dtype=float)[:, k] for l in ax.get_lines() if len(l.get_xydata())]
    for c in ax.collections:
        off = np.asarray(c.get_offsets(), dtype=float)
        if off.ndim == 2 and len(off):
            vals.append(off[:, k])
    if axis == "y":
        vals.append(np.asarray([p.get_y() + p.get_height() for p in ax.patches
                                if isinstance(p, matplotlib.patches.Rectangle)], dtype=float))
    v = np.concatenate(vals) if vals else np.asarray([])
    return v[np.isfinite(v) & (v > 0)]


def overlap(a, b, slack=1.0):
    """Whether two display boxes overlap by more than `slack` pixels each way."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > slack) and (min(a.y1, b.y1) - max(a.y0, b.y0) > slack)


def test_every_figure_in_docs_is_checked():
    # 18 PNGs as of this test; a figure added to docs/repro is checked without a word.
    assert len(FIGURES) >= 18, FIGURES


@pytest.mark.parametrize("png", FIGURES, ids=[Path(p).parent.name for p in FIGURES])
def test_figure_reads_cleanly(png):
    fig = draw(png)
    r = fig.canvas.get_renderer()
    box = fig.bbox
    problems = []
    shown = drawn_texts(fig)
    shown_ids = {id(t) for t in shown}
    for t in shown:
        e = t.get_window_extent(r)
        if e.x0 < box.x0 - 1 or e.y0 < box.y0 - 1 or e.x1 > box.x1 + 1 or e.y1 > box.y1 + 1:
            problems.append(f"cut off at the edge: {t.get_text()!r}")
        if re.search(r"(^|[\s(\[])us([\s)\]/]|$)", t.get_text()):
            problems.append(f"'us' for µs: {t.get_text()!r}")
    for ax in fig.axes:
        for which, labels in (("x", ax.get_xticklabels()), ("y", ax.get_yticklabels())):
            on = [(t, t.get_window_extent(r)) for t in labels if id(t) in shown_ids]
            for (t1, e1), (t2, e2) in zip(on, on[1:]):
                if overlap(e1, e2):
                    problems.append(f"{which} tick labels overlap: {t1.get_text()!r} {t2.get_text()!r}")
        notes = [(t, t.get_window_extent(r)) for t in ax.texts if t.get_visible() and t.get_text()]
        for i, (t1, e1) in enumerate(notes):
            for t2, e2 in notes[i + 1:]:
                if overlap(e1, e2):
                    problems.append(f"annotations overlap: {t1.get_text()!r} {t2.get_text()!r}")
        legend = ax.get_legend()
        if legend is not None:
            lb = legend.get_window_extent(r)
            for t, e in notes:
                if overlap(e, lb):
                    problems.append(f"annotation under the legend: {t.get_text()!r}")
            for line in ax.get_lines():
                xy = line.get_xydata()
                if not len(xy):
                    continue
                pts = ax.transData.transform(xy)
                # The segments between the points too, at 16 points each.
                if len(pts) > 1:
                    f = np.linspace(0, 1, 16)[:, None, None]
                    pts = (pts[:-1] * (1 - f) + pts[1:] * f).reshape(-1, 2)
                inside = (pts[:, 0] > lb.x0) & (pts[:, 0] < lb.x1) & (pts[:, 1] > lb.y0) & (pts[:, 1] < lb.y1)
                if inside.any():
                    problems.append(f"legend over the data of {line.get_label()!r}")
        for axis in ("x", "y"):
            scale = ax.get_xscale() if axis == "x" else ax.get_yscale()
            label = ax.get_xlabel() if axis == "x" else ax.get_ylabel()
            vals = data_values(ax, axis)
            if len(vals) < 2:
                continue
            # The bulk of the values (a timeline's few near-zero samples do not count).
            bulk = np.percentile(vals, 95) / np.percentile(vals, 5)
            if scale == "linear" and bulk > 1000:
                problems.append(f"{axis} axis linear over {bulk:.0f}x: {label!r}")
            if scale == "log" and vals.max() / vals.min() < 10:
                problems.append(f"{axis} axis log over only {vals.max() / vals.min():.1f}x: {label!r}")
    plt.close(fig)
    assert not problems, "\n".join(sorted(set(problems)))
