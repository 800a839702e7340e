"""Plot `rocast bcast`'s latency table (bcast.csv): broadcast latency against message
size, one line per scheme. Each scheme has its own line style and hollow marker, so
schemes that coincide (the binomial tree and pipeline for one-block messages) stay
visible, one drawn through the other.

Usage: python/plot.py bcast bcast.csv bcast.png ["title"]
"""


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
