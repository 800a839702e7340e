"""The command line every rocast plot script shares: `script.py data.csv out.png "title"`.

A script passes its usage text and a `draw(df, title, plt)` that returns the figure;
this reads the CSV with pandas, saves the PNG at 120 dpi, and returns the exit code
(2 with the usage on bad arguments).
"""

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def run(doc, draw, argv=None):
    argv = sys.argv if argv is None else argv
    if len(argv) != 4:
        print(doc, file=sys.stderr)
        return 2
    csv, png, title = argv[1:]
    fig = draw(pd.read_csv(csv), title, plt)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    return 0
