"""Cepheus Fig. 10 in the paper's form, from `rocast sim --preset cepheus-fig10`'s
fig10.csv: single IO latency of a 3-replica write against IO size, one group of bars
per size (1-unicast, 3-unicasts, Cepheus, chain), with the paper's stated reductions of
Cepheus against 3 unicasts (-23% at 8 KB, -60% at 512 KB) drawn as markers.

Usage: python/plot.py cepheus_fig10 fig10.csv fig10.png "title"
"""

PAPER_REDUCTION = {8 << 10: 0.23, 512 << 10: 0.60}
ORDER = ["1-unicast", "3-unicasts", "cepheus", "chain"]


def draw(df, title, plt):
    fig, ax = plt.subplots(figsize=(9, 4.5))
    sizes = sorted(df["size_bytes"].unique())
    width = 0.8 / len(ORDER)
    for i, scheme in enumerate(ORDER):
        g = df[df["scheme"] == scheme].set_index("size_bytes").reindex(sizes)
        xs = [j + (i - 1.5) * width for j in range(len(sizes))]
        ax.bar(xs, g["latency_us"], width, label=scheme)
    three = df[df["scheme"] == "3-unicasts"].set_index("size_bytes")["latency_us"]
    for j, s in enumerate(sizes):
        if s in PAPER_REDUCTION:
            y = three.loc[s] * (1 - PAPER_REDUCTION[s])
            ax.plot([j + 0.5 * width], [y], marker="_", markersize=18, color="black")
            ax.annotate(f"paper: -{PAPER_REDUCTION[s]:.0%}", (j + 0.5 * width, y),
                        textcoords="offset points", xytext=(6, 4), fontsize=7)
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([f"{s >> 10}K" for s in sizes])
    ax.set_yscale("log")
    ax.set_xlabel("IO size")
    ax.set_ylabel("IO latency (µs)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    return fig
