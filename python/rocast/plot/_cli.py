"""The command line every rocast plot shares: `DATA.csv OUT.png "title"`.

A figure module passes its usage text and a `draw(df, title, plt)` that returns the
figure; this reads the CSV with pandas and saves the figure twice: PNG at 200 dpi
(for reading on screen) and SVG beside it (vector, for papers and zooming). Returns the
exit code (2 with the usage on bad arguments).
"""

import os
import sys

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd

PNG_DPI = 200


def save(fig, png):
    """Saves `fig` as `png` and as the same name with .svg; returns both paths."""
    fig.tight_layout()
    fig.savefig(png, dpi=PNG_DPI)
    svg = os.path.splitext(png)[0] + ".svg"
    # No embedded date: the same data gives the same bytes.
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)
    return png, svg


def sibling(csv_path, suffix):
    """The table an experiment wrote beside `csv_path` as STEM-SUFFIX.csv (the paper's
    points, the phases with their fair shares), or None."""
    stem, ext = os.path.splitext(csv_path)
    path = f"{stem}-{suffix}{ext}"
    return pd.read_csv(path) if os.path.exists(path) else None


def fair_share_line(ax, phases, label="max-min fair share"):
    """The multicast's max-min fair share per phase, a black dashed step line."""
    if phases is None or "fair_gbps" not in phases:
        return
    xs, ys = [], []
    for row in phases.sort_values("phase_start_ms").itertuples():
        xs += [row.phase_start_ms, row.phase_end_ms]
        ys += [row.fair_gbps, row.fair_gbps]
    ax.plot(xs, ys, color="black", linestyle="--", linewidth=1, label=label)


def run(doc, draw, argv=None):
    argv = sys.argv if argv is None else argv
    if len(argv) != 4:
        print(doc, file=sys.stderr)
        return 2
    csv, png, title = argv[1:]
    # A command draws into files only (a notebook importing rocast.plot keeps its own backend).
    matplotlib.use("Agg")
    save(draw(pd.read_csv(csv), title, plt), png)
    return 0
