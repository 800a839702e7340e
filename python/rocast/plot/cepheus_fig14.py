"""Plot Cepheus' fairness experiment (rocast sim --preset cepheus-fairness).

Usage: python/plot.py cepheus_fig14 fairness.csv fairness.png "title"

The CSV has one row per sample and policy: ms, policy, gbps (f1, the multicast),
u0_gbps and u1_gbps (f2 and f3, the unicasts), queue_kb, pauses. One panel per CNP
policy shows the three flows' throughput against time, as Cepheus' Fig. 14; where
fairness-phases.csv lies beside it, the multicast's max-min fair share per phase is
the black dashed line (the paper: f1 converges to it).
"""

# The table the experiment writes beside its CSV (STEM-phases.csv): draw's `phases`.
SIBLING = "phases"

from ._cli import fair_share_line, legend_outside


def draw(df, title, plt, phases=None):
    policies = list(dict.fromkeys(df["policy"]))
    fig, axes = plt.subplots(
        len(policies), 1, figsize=(7, 2.2 * len(policies) + 0.6), sharex=True, squeeze=False
    )
    flows = [("gbps", "f1 multicast"), ("u0_gbps", "f2 unicast"), ("u1_gbps", "f3 unicast")]
    for ax, policy in zip(axes[:, 0], policies):
        g = df[df["policy"] == policy]
        for col, label in flows:
            if col in g:
                ax.plot(g["ms"], g[col], label=label, drawstyle="steps-post", linewidth=1)
        if phases is not None:
            fair_share_line(ax, phases[phases["policy"] == policy], "f1's max-min fair share")
        ax.text(0.01, 0.04, f"CNP policy: {policy}", transform=ax.transAxes, fontsize=8,
                bbox=dict(facecolor="white", alpha=0.8, edgecolor="none"))
        ax.set_ylabel("throughput (Gbps)", fontsize=8)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0, 0].set_title(title, fontsize=9)
    # Beside the top panel: every panel's lines reach its upper right corner.
    legend_outside(axes[0, 0], fontsize=7)
    axes[-1, 0].set_xlabel("time (ms)")
    return fig
