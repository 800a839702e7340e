"""Cepheus Fig. 13 in the paper's form, from `rocast sim --preset cepheus-loss`'s
loss.csv: FCT (left) and throughput normalised to the lossless run (right) against
the loss rate on the middle links, one line per (scheme, retransmission, group).
Go-back-N is the paper's; selective repeat is rocast's extra line. Where a Cepheus
line crosses above its group's chain line on the left, Cepheus is the slower one
(the paper: only at 512 members and 1e-4).

Usage: python/plot.py cepheus_fig13 loss.csv fig13.png "title"
"""

from ._cli import log_scale_if_wide

# Loss 0 on a log axis: drawn at this rate and labelled "0".
ZERO_AT = 1e-9


def draw(df, title, plt):
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.5))
    df = df.copy()
    df["x"] = df["loss"].where(df["loss"] > 0, ZERO_AT)
    styles = {"gbn": "-", "sr": ":"}
    colours = {"cepheus": "C0", "chain": "C2"}
    markers = {}
    for i, g in enumerate(sorted(df["group"].unique())):
        markers[g] = "os^v"[i % 4]
    for (scheme, rtx, group), g in df.groupby(["scheme", "retransmission", "group"], sort=False):
        g = g.sort_values("x")
        label = f"{scheme} {rtx.upper()} ({group})"
        kw = dict(linestyle=styles.get(rtx, "-"), color=colours.get(scheme), marker=markers[group],
                  label=label)
        ax.plot(g["x"], g["fct_us"] / 1e3, **kw)
        bx.plot(g["x"], 1.0 / g["normalised_fct"], **kw)
    for a in (ax, bx):
        a.set_xscale("log")
        ticks = sorted(df["x"].unique())
        a.set_xticks(ticks)
        a.set_xticklabels(["0" if t == ZERO_AT else f"{t:.0e}" for t in ticks], fontsize=8)
        a.set_xlabel("loss rate on middle links")
        a.grid(True, which="both", alpha=0.3)
    ax.set_ylabel("FCT (ms)")
    log_scale_if_wide(ax, df["fct_us"] / 1e3)
    bx.set_ylabel("throughput / lossless throughput")
    bx.set_ylim(0, 1.05)
    bx.legend(fontsize=7, ncol=2)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
