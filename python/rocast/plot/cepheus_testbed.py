"""Cepheus Figs 8-9 in the paper's form, from `rocast sim --preset cepheus-testbed`'s
testbed.csv: MPI-Bcast completion time of a 1 -> 3 group against message size (left)
and each overlay's time over Cepheus' (right). Where testbed-paper.csv lies beside it
(the paper's stated ranges), each range is a shaded band over the sizes it covers,
coloured as its scheme, and the paper's 256 MB times are black crosses on the left.

Usage: python/plot.py cepheus_testbed testbed.csv testbed.png "title"
"""

# The table the experiment writes beside its CSV (STEM-paper.csv): draw's `paper`.
SIBLING = "paper"


LABELS = {"cepheus": "Cepheus", "tree": "binomial tree", "chain": "chain",
          "pipeline": "RDMC binomial pipeline"}
STYLES = {"cepheus": ("C0", "-", "o"), "tree": ("C1", "--", "s"), "chain": ("C2", "-.", "^"),
          "pipeline": ("C3", ":", "v")}


def draw(df, title, plt, paper=None):
    fig, (ax, rx) = plt.subplots(1, 2, figsize=(11, 4.2))
    ceph = df[df["scheme"] == "cepheus"].set_index("size_bytes")["latency_us"]
    for scheme, g in df.groupby("scheme", sort=False):
        colour, ls, marker = STYLES.get(scheme, (None, "-", "o"))
        g = g.sort_values("size_bytes")
        # Hollow markers: tree and pipeline coincide at small sizes and both stay visible.
        kw = dict(color=colour, linestyle=ls, marker=marker, markerfacecolor="none",
                  label=LABELS.get(scheme, scheme))
        ax.plot(g["size_bytes"], g["latency_us"] / 1e3, **kw)
        if scheme != "cepheus":
            ratio = g.set_index("size_bytes")["latency_us"] / ceph
            rx.plot(ratio.index, ratio.values, **kw)
    if paper is not None:
        seen = set()
        for row in paper[paper["what"] == "ratio"].itertuples():
            colour = STYLES.get(row.scheme, ("grey",))[0]
            # 0 stands for "from the smallest" and "to the largest" size measured.
            lo = max(row.size_min, df["size_bytes"].min())
            hi = row.size_max if row.size_max > 0 else df["size_bytes"].max()
            rx.fill_between([lo, hi], row.paper_lo, row.paper_hi, color=colour,
                            alpha=0.15, label=None if row.scheme in seen
                            else f"paper's range: {LABELS.get(row.scheme, row.scheme)}")
            seen.add(row.scheme)
        t = paper[paper["what"] == "time_ms"]
        for i, row in enumerate(t.itertuples()):
            ax.scatter(row.size_min, row.paper_lo, marker="x", color="black", s=60, zorder=5,
                       label="paper (256 MB)" if i == 0 else None)
            ax.annotate(LABELS.get(row.scheme, row.scheme), (row.size_min, row.paper_lo),
                        fontsize=6, xytext=(-40, 6), textcoords="offset points")
    for a in (ax, rx):
        a.set_xscale("log", base=2)
        a.set_xlabel("message size (bytes)")
        a.grid(alpha=0.3, which="both")
    ax.set_yscale("log")
    ax.set_ylabel("MPI-Bcast completion time (ms)")
    ax.legend(fontsize=7)
    rx.set_ylabel("overlay time / Cepheus time")
    rx.axhline(1.0, color="black", linewidth=0.8)
    rx.legend(fontsize=6, ncol=2)
    fig.suptitle(title, fontsize=9)
    return fig
