"""Plot PEEL's offline motivation figures (rocast sim --preset peel-fig1 | peel-fig3).

Usage: python/plot.py peel_static peel-fig1.csv|peel-fig3.csv out.png "title"

peel-fig1.csv: core-link traversals of a ring, rocast's heap binary tree and NCCL's
binary tree over the multicast-optimal tree's, per group size; the paper's 70-80%
band is shaded. peel-fig3.csv: the Bloom-filter header in bytes per fat-tree arity, a
line per (group share, false-positive ratio), against the 1500 B MTU; the paper's
crossing (the first k above 32) is marked.
"""



def draw_fig1(df, title, plt):
    fig, ax = plt.subplots(figsize=(6, 3.8))
    df = df[df["optimal_core_links"] > 0]
    for col, name in [
        ("ring_over_optimal", "ring"),
        ("tree_over_optimal", "binary tree (rocast's, heap order)"),
        ("nccl_tree_over_optimal", "binary tree (NCCL's)"),
    ]:
        ax.plot(df["gpus"], df[col], marker="o", label=name)
    ax.axhspan(1.7, 1.8, color="black", alpha=0.15, label="paper: 70-80% over optimal")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("Broadcast scale (GPUs)")
    ax.set_ylabel("core-link traversals / optimal")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    return fig


def draw_fig3(df, title, plt):
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for (share, fpr), g in df.groupby(["group_fraction", "fpr"], sort=True):
        g = g.sort_values("k")
        ax.plot(g["k"], g["header_bytes"], marker="o", label=f"share {share:g}, FPR {fpr:g}")
    ax.axhline(1500, color="black", linestyle="--", label="1500 B MTU")
    ax.axvspan(32, 40, color="black", alpha=0.1, label="paper: passes the MTU once k > 32")
    ax.set_yscale("log")
    ax.set_xlabel("fat-tree arity k")
    ax.set_ylabel("header (bytes)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6, ncol=2)
    ax.set_title(title, fontsize=9)
    return fig


def draw(df, title, plt):
    if "ring_over_optimal" in df.columns:
        return draw_fig1(df, title, plt)
    if "header_bytes" in df.columns:
        return draw_fig3(df, title, plt)
    raise SystemExit("peel_static: neither a peel-fig1 nor a peel-fig3 CSV")
