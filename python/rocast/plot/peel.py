"""Plot PEEL's Figs 5-7 (rocast sim --preset peel-fig5 | peel-fig6 | peel-fig7).

Usage: python/plot.py peel peel-figN.csv peel-figN.png "title"

The CSV has one row per (x, scheme): its second column is the x axis (size in bytes,
group size in GPUs, or failed-link fraction), then scheme, jobs, mean_ms and p99_ms.
The plot shows mean and 99th-percentile CCT per scheme, as the paper's figures. Where
rocast wrote peel-figN-paper.csv beside it, the paper's claims are overlaid as black
crosses: the paper states ratios, so each cross sits at rocast's CCT of the claim's
other scheme times the paper's ratio (e.g. PEEL's mean at 2 MB = rocast's optimal x 1.23).
"""

from ._cli import log_scale_if_wide

# The table the experiment writes beside its CSV (STEM-paper.csv): draw's `paper`.
SIBLING = "paper"


MARKERS = "osv^Dx"
LINES = ["-", "--", "-.", ":"]
LABELS = {
    "size": ("message size (MB)", lambda v: v / 2**20, True),
    "gpus": ("Broadcast scale (GPUs)", lambda v: v, True),
    "failed": ("failed spine-leaf links (%)", lambda v: v * 100, False),
}


def draw(df, title, plt, paper=None):
    xcol = df.columns[1]
    xlabel, scale, log = LABELS.get(xcol, (xcol, lambda v: v, False))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, col, name in [(axes[0], "mean_ms", "mean CCT (ms)"), (axes[1], "p99_ms", "p99 CCT (ms)")]:
        for i, (scheme, g) in enumerate(df.groupby("scheme", sort=False)):
            g = g.sort_values(xcol)
            # A line style and hollow marker per scheme: lines that coincide (PEEL with
            # and without aggregation) stay visible, one drawn through the other.
            ax.plot(scale(g[xcol]), g[col], marker=MARKERS[i % len(MARKERS)],
                    linestyle=LINES[i % len(LINES)], markerfacecolor="none",
                    markersize=7 - i % 3, label=scheme)
        if paper is not None:
            p = paper[paper["stat"] == col].sort_values(["x", "paper_ms"], ascending=[True, False])
            at_x = {}
            for i, row in enumerate(p.itertuples()):
                ax.scatter(scale(row.x), row.paper_ms, marker="x", color="black", s=60, zorder=5,
                           label="paper (ratio x rocast)" if i == 0 else None)
                # Claims at one x stack downwards, highest first, so their names
                # do not print over each other.
                k = at_x.get(row.x, 0)
                at_x[row.x] = k + 1
                ax.annotate(f"{row.scheme} vs {row.relative_to}", (scale(row.x), row.paper_ms),
                            fontsize=6, xytext=(3, 3 - 8 * k), textcoords="offset points")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(name)
        # Log where the values span a decade, the paper's points included (a 30x claim
        # on a linear axis flattens every curve under it); else plain ticks read better.
        vals = list(df[col])
        if paper is not None:
            vals += list(paper[paper["stat"] == col]["paper_ms"])
        log_scale_if_wide(ax, vals)
        if log:
            ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3, which="both")
    axes[1].legend(fontsize=8)
    if paper is not None and (paper["stat"] == "mean_ms").any():
        axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    return fig
