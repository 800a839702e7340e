"""Plot a multicast's sending rate over time per CNP policy (rocast sim --preset tmcf-cpmp).

Usage: plot_rate.py rate.csv rate.png "title"

The CSV has one row per sample: ms, policy, gbps.
"""

import sys

from plotcli import run


def draw(df, title, plt):
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for policy, g in df.groupby("policy", sort=False):
        ax.plot(g["ms"], g["gbps"], label=policy, drawstyle="steps-post", linewidth=1)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("multicast sending rate (Gbps)")
    ax.set_title(title, fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


if __name__ == "__main__":
    sys.exit(run(__doc__, draw))
