"""Cepheus Fig. 12 in the paper's form, from `rocast sim --preset cepheus-fig12`'s
fig12.csv: FCT of a 512-member multicast against flow size (left), and each
baseline's FCT over Cepheus' (right) with the paper's "up to" ratios (§V-C) drawn
over the size ranges they are stated for (short <= 64 KiB, large >= 1 MiB).

Usage: python/plot.py cepheus_fig12 fig12.csv fig12.png "title"
"""

LABELS = {"cepheus": "Cepheus", "tree": "binomial tree (BT)", "chain": "chain"}
# Cepheus §V-C: (scheme, short?, paper's "up to" ratio).
PAPER = [("chain", True, 164.0), ("tree", True, 4.5), ("chain", False, 2.1), ("tree", False, 8.9)]
COLOURS = {"cepheus": "C0", "tree": "C1", "chain": "C2"}


def draw(df, title, plt):
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.5))
    for scheme, g in df.groupby("scheme", sort=False):
        g = g.sort_values("size_bytes")
        ax.plot(g["size_bytes"], g["latency_us"], marker="o", label=LABELS.get(scheme, scheme),
                color=COLOURS.get(scheme))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("flow size (bytes)")
    ax.set_ylabel("FCT (µs)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ceph = df[df["scheme"] == "cepheus"].set_index("size_bytes")["latency_us"]
    lo, hi = df["size_bytes"].min(), df["size_bytes"].max()
    for scheme, g in df[df["scheme"] != "cepheus"].groupby("scheme", sort=False):
        g = g.sort_values("size_bytes")
        r = g["latency_us"].values / ceph.loc[g["size_bytes"]].values
        bx.plot(g["size_bytes"], r, marker="o", label=f"rocast {LABELS.get(scheme, scheme)}",
                color=COLOURS.get(scheme))
    for scheme, short, ratio in PAPER:
        x0, x1 = (lo, 64 << 10) if short else (1 << 20, hi)
        bx.hlines(ratio, x0, x1, colors=COLOURS.get(scheme), linestyles="dashed")
        bx.annotate(f"paper {scheme} {'short' if short else 'large'}: up to {ratio:g}x",
                    (x0, ratio), textcoords="offset points", xytext=(2, 3), fontsize=7,
                    color=COLOURS.get(scheme))
    bx.set_xscale("log", base=2)
    bx.set_yscale("log")
    bx.set_xlabel("flow size (bytes)")
    bx.set_ylabel("FCT / Cepheus FCT")
    bx.grid(True, which="both", alpha=0.3)
    bx.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
