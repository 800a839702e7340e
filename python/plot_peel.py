"""Plot PEEL's Figs 5-7 (rocast sim --preset peel-fig5 | peel-fig6 | peel-fig7).

Usage: plot_peel.py peel-figN.csv peel-figN.png "title"

The CSV has one row per (x, scheme): its second column is the x axis (size in bytes,
group size in GPUs, or failed-link fraction), then scheme, jobs, mean_ms and p99_ms.
The plot shows mean and 99th-percentile CCT per scheme, as the paper's figures.
"""

import sys

from plotcli import run

LABELS = {
    "size": ("message size (MB)", lambda v: v / 2**20, True),
    "gpus": ("Broadcast scale (GPUs)", lambda v: v, True),
    "failed": ("failed spine-leaf links (%)", lambda v: v * 100, False),
}


def draw(df, title, plt):
    xcol = df.columns[1]
    xlabel, scale, log = LABELS.get(xcol, (xcol, lambda v: v, False))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, col, name in [(axes[0], "mean_ms", "mean CCT (ms)"), (axes[1], "p99_ms", "p99 CCT (ms)")]:
        for scheme, g in df.groupby("scheme", sort=False):
            g = g.sort_values(xcol)
            ax.plot(scale(g[xcol]), g[col], marker="o", label=scheme)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(name)
        ax.set_yscale("log")
        if log:
            ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3, which="both")
    axes[1].legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    return fig


if __name__ == "__main__":
    sys.exit(run(__doc__, draw))
