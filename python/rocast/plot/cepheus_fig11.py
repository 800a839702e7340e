"""Cepheus Fig. 11b in the paper's form, from `rocast sim --preset cepheus-fig11`'s
fig11.csv: HPL's communication time per operation (PB on 1 x 4, RS on 4 x 1) with HPL's
algorithm and with Cepheus, the paper's reductions (-67 % PB, -18 % RS) marked.

Usage: python/plot.py cepheus_fig11 fig11.csv fig11.png "title"
"""

PAPER = {"PB": 0.67, "RS": 0.18}


def draw(df, title, plt):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    labels = [f"{g} {op}" for g, op in zip(df["grid"], df["op"])]
    xs = range(len(df))
    ax.bar([x - 0.2 for x in xs], df["hpl_ms"], 0.4, label="HPL's algorithm")
    ax.bar([x + 0.2 for x in xs], df["cepheus_ms"], 0.4, label="Cepheus")
    for x, (op, base) in enumerate(zip(df["op"], df["hpl_ms"])):
        key = op.split("-")[0]
        if key in PAPER:
            y = base * (1 - PAPER[key])
            ax.plot([x + 0.2], [y], marker="_", markersize=24, color="black")
            ax.annotate(f"paper: -{PAPER[key]:.0%}", (x + 0.2, y), textcoords="offset points",
                        xytext=(8, 3), fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels)
    ax.set_ylabel("communication time (ms)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    return fig
