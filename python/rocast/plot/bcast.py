"""Plot `rocast bcast`'s latency table (bcast.csv): broadcast latency against message
size, one line per scheme. Each scheme has its own line style and hollow marker, so
schemes that coincide (the binomial tree and pipeline for one-block messages) stay
visible, one drawn through the other.

Usage: plot_bcast.py bcast.csv bcast.png ["title"]
"""

import sys

import pandas as pd

from ._cli import save

LABELS = {
    "sequential": "sequential (N unicasts)",
    "tree": "binomial tree",
    "chain": "chain",
    "pipeline": "binomial pipeline (RDMC)",
    "ring": "ring (NCCL-style)",
}
MARKERS = "osv^Dx"
LINES = ["-", "--", "-.", ":"]


def draw(df, title, plt):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (scheme, g) in enumerate(df.groupby("scheme", sort=False)):
        g = g.sort_values("size_bytes")
        ax.plot(g["size_bytes"], g["latency_us"], marker=MARKERS[i % len(MARKERS)],
                linestyle=LINES[i % len(LINES)], markerfacecolor="none", ms=7 - i % 3,
                label=LABELS.get(scheme, scheme))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("broadcast latency (µs)")
    ax.set_title(f"rocast bcast (simulated){': ' + title if title else ''}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


def main(argv=None):
    """The command line (the shim python/plot_bcast.py): CSV PNG [TITLE]; PNG and SVG."""
    import matplotlib

    argv = sys.argv if argv is None else argv
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    save(draw(pd.read_csv(argv[1]), argv[3] if len(argv) > 3 else "", plt), argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
