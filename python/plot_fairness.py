"""Plot Cepheus' fairness experiment (rocast sim --preset cepheus-fairness).

Usage: plot_fairness.py fairness.csv fairness.png "title"

The CSV has one row per millisecond: ms, f1_gbps (the multicast), f2_gbps, f3_gbps
(the unicasts). The plot is throughput against time, as Cepheus' Fig. 14.
"""

import sys

from plotcli import run


def draw(df, title, plt):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for col, label in [("f1_gbps", "f1 multicast"), ("f2_gbps", "f2 unicast"), ("f3_gbps", "f3 unicast")]:
        ax.plot(df["ms"], df[col], label=label, drawstyle="steps-post")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("throughput (Gbps, per ms)")
    ax.set_title(title, fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


if __name__ == "__main__":
    sys.exit(run(__doc__, draw))
