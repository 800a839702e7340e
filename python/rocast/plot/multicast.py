"""One multicast group, Cepheus against the application-layer overlays, from
`rocast sim --preset multicast`'s multicast.csv: completion time against message size
(left) and each overlay's time over Cepheus' (right).

Usage: python/plot.py multicast multicast.csv multicast.png "title"
"""

LABELS = {"cepheus": "Cepheus (in-network)", "tree": "binomial tree", "chain": "chain",
          "pipeline": "RDMC binomial pipeline", "ring": "ring", "sequential": "N unicasts"}
COLOURS = {"cepheus": "C0", "tree": "C1", "chain": "C2", "pipeline": "C3", "ring": "C4",
           "sequential": "C5"}


def draw(df, title, plt):
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.5))
    ceph = df[df["scheme"] == "cepheus"].set_index("size_bytes")["latency_us"]
    for scheme, g in df.groupby("scheme", sort=False):
        g = g.sort_values("size_bytes")
        style = dict(marker="o", label=LABELS.get(scheme, scheme), color=COLOURS.get(scheme))
        ax.plot(g["size_bytes"], g["latency_us"], **style)
        if scheme != "cepheus":
            r = g["latency_us"].values / ceph.loc[g["size_bytes"]].values
            bx.plot(g["size_bytes"], r, **style)
    for a in (ax, bx):
        a.set_xscale("log", base=2)
        a.set_xlabel("message size (bytes)")
        a.grid(True, which="both", alpha=0.3)
    ax.set_yscale("log")
    bx.set_yscale("log")
    ax.set_ylabel("time until every member holds it (µs)")
    bx.set_ylabel("overlay time / Cepheus time")
    bx.axhline(1.0, color="grey", linewidth=0.8)
    ax.legend(fontsize=8)
    bx.legend(fontsize=8)
    fig.suptitle(title)
    return fig
