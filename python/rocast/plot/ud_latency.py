"""Plot multicast latency against group size (rocast sim --preset ud-latency).

Usage: python/plot.py ud_latency ud-latency.csv ud-latency.png "title"

The CSV has one row per (n, size, scheme): n (group size), size (message bytes),
scheme (ud-mcast: UD multicast on the broadcast-select fabric; binomial-rc: the
binomial tree over RC; ud-mcast-rx-tail: the multicast with the unicast tail drawn
per receiver), mean_us, p50_us, p99_us, max_us. One panel per message size, the
group size on a log2 axis; solid lines are means, dashed ones p99.
"""

import math

from ._cli import legend_outside

LABELS = {
    "ud-mcast": "UD multicast (ODBSS)",
    "binomial-rc": "binomial tree (RC)",
    "ud-mcast-rx-tail": "UD multicast, tail per receiver",
}


def draw(df, title, plt):
    sizes = sorted(df["size"].unique())
    cols = min(2, len(sizes))
    rows = math.ceil(len(sizes) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax in axes.flat[len(sizes):]:
        ax.set_visible(False)
    for ax, size in zip(axes.flat, sizes):
        d = df[df["size"] == size]
        for i, (scheme, g) in enumerate(d.groupby("scheme", sort=False)):
            g = g.sort_values("n")
            color = f"C{i}"
            ax.plot(g["n"], g["mean_us"], marker="o", markersize=3, color=color,
                    label=f"{LABELS.get(scheme, scheme)} mean")
            ax.plot(g["n"], g["p99_us"], linestyle="--", linewidth=0.9, color=color,
                    label=f"{LABELS.get(scheme, scheme)} p99")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("group size N")
        ax.set_ylabel("completion latency (µs)")
        ax.set_title(f"{size} B", fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    # Beside the first row: the p99 lines climb to every panel's top.
    legend_outside(axes[0, -1], fontsize=7)
    fig.suptitle(title, fontsize=9)
    return fig
