"""Plot a multicast's sending rate over time per CNP policy (rocast sim --preset tmcf-cpmp).

Usage: plot_rate.py rate.csv rate.png "title"

The CSV has one row per sample: ms, policy, gbps.
"""

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    csv, png, title = argv[1:]
    df = pd.read_csv(csv)
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for policy, g in df.groupby("policy", sort=False):
        ax.plot(g["ms"], g["gbps"], label=policy, drawstyle="steps-post", linewidth=1)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("multicast sending rate (Gbps)")
    ax.set_title(title, fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
