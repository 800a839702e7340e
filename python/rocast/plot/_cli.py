"""What every rocast figure shares: saving (PNG at 200 dpi for reading on screen, SVG
beside it, vector, for papers and zooming), the tables an experiment writes beside its
CSV, the fair-share line, and the one command that draws any figure from its CSV
(`python/plot.py FIGURE DATA.csv OUT.png TITLE`, what `rocast sim` runs). A figure module
has `draw(df, title, plt[, SIBLING=table])` returning the matplotlib Figure.
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
    # No embedded date and a fixed salt for the element ids: the same data gives the
    # same bytes.
    with matplotlib.rc_context({"svg.hashsalt": "rocast"}):
        fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)
    return png, svg


def sibling(csv_path, suffix):
    """The table an experiment wrote beside `csv_path` as STEM-SUFFIX.csv (the paper's
    points, the phases with their fair shares), or None."""
    stem, ext = os.path.splitext(csv_path)
    path = f"{stem}-{suffix}{ext}"
    return pd.read_csv(path) if os.path.exists(path) else None


def log_scale_if_wide(ax, values, axis="y", ratio=10.0):
    """A log scale on `axis` when the positive `values` drawn there span more than
    `ratio` (a decade by default): over decades a linear axis flattens every curve
    under the largest; over less than one a log axis shows a tick or two."""
    v = [float(x) for x in values if x == x and x > 0]
    if v and max(v) / min(v) > ratio:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        return True
    return False


def legend_outside(ax, **kw):
    """The legend to the right of `ax`, outside it, where no data lies (the layout
    makes room for it)."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kw)


def fair_share_line(ax, phases, label="max-min fair share"):
    """The multicast's max-min fair share per phase, a black dashed step line."""
    if phases is None or "fair_gbps" not in phases:
        return
    xs, ys = [], []
    for row in phases.sort_values("phase_start_ms").itertuples():
        xs += [row.phase_start_ms, row.phase_end_ms]
        ys += [row.fair_gbps, row.fair_gbps]
    ax.plot(xs, ys, color="black", linestyle="--", linewidth=1, label=label)


def main(argv=None):
    """`python/plot.py FIGURE DATA.csv OUT.png [TITLE]`: draws DATA.csv with
    rocast.plot.FIGURE's draw (and the table its SIBLING names, when it lies beside
    DATA.csv), saving OUT.png and OUT.svg. Exit 2 with the usage on bad arguments."""
    import importlib

    argv = sys.argv if argv is None else argv
    if len(argv) not in (4, 5):
        print(main.__doc__, file=sys.stderr)
        return 2
    figure, csv, png = argv[1:4]
    title = argv[4] if len(argv) == 5 else ""
    try:
        module = importlib.import_module(f"rocast.plot.{figure}")
    except ImportError:
        print(f"plot: no figure {figure!r} in rocast.plot", file=sys.stderr)
        return 2
    # A command draws into files only (a notebook importing rocast.plot keeps its own backend).
    matplotlib.use("Agg")
    extra = {}
    suffix = getattr(module, "SIBLING", None)
    if suffix is not None:
        extra[suffix] = sibling(csv, suffix)
    save(module.draw(pd.read_csv(csv), title, plt, **extra), png)
    return 0
