"""Redraws every figure in docs/repro/ (PNG and SVG) from the CSV beside it with the
plot code of the installed package (scripts/install-python.sh builds it from this
tree), as `rocast sim` draws them (python/plot.py): the data stay the
runs' (each folder's provenance.json), the drawing is today's. Run after a change to
python/rocast/plot/; tests/python/test_figures.py checks the same drawings.

    .venv/bin/python scripts/redraw-repro-figures.py [docs/repro]
"""

import glob
import os
import sys
from pathlib import Path

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import rocast  # noqa: E402
from rocast.plot._cli import main as plot_main  # noqa: E402
from rocast.plot.titles import repro_title  # noqa: E402


def figure_of(stem):
    return "bcast" if stem == "bcast" else rocast._lib().figure_for_table(stem)


def main(root="docs/repro"):
    n = 0
    for png in sorted(glob.glob(os.path.join(root, "*", "*.png"))):
        stem = Path(png).stem
        csv = str(Path(png).with_suffix(".csv"))
        fig = figure_of(stem)
        if fig is None or not os.path.exists(csv):
            print(f"redraw: {png}: no CSV or no figure for {stem}", file=sys.stderr)
            return 1
        rc = plot_main(["plot.py", fig, csv, png, repro_title(Path(png).parent)])
        if rc != 0:
            return rc
        n += 1
        print(f"redrew {png} ({fig})")
    print(f"{n} figures redrawn")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
