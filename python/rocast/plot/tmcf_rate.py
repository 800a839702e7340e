"""Plot a multicast's sending rate over time per CNP policy (rocast sim --preset
tmcf-cpmp or tmcf-moving).

Usage: python/plot.py tmcf_rate rate.csv rate.png "title"

The CSV has one row per sample: ms, policy, gbps (the multicast), u<k>_gbps (each
unicast), queue_kb (the fullest receiver downlink), pauses (PFC pauses so far). The
top panel is the multicast's rate, the bottom one the queue, one line per policy.
Where the experiment wrote STEM-phases.csv beside it, the multicast's max-min fair
share per phase (what TMCF's paper says the sender should follow) is the black dashed
line.
"""

# The table the experiment writes beside its CSV (STEM-phases.csv): draw's `phases`.
SIBLING = "phases"

from ._cli import fair_share_line


def draw(df, title, plt, phases=None):
    fig, (rate, queue) = plt.subplots(
        2, 1, figsize=(8, 5.5), sharex=True, gridspec_kw={"height_ratios": [2, 1]}
    )
    for policy, g in df.groupby("policy", sort=False):
        rate.plot(g["ms"], g["gbps"], label=policy, drawstyle="steps-post", linewidth=1)
        queue.plot(g["ms"], g["queue_kb"], label=policy, linewidth=0.8)
    if phases is not None:
        # Every policy sees the same phases and shares: draw them once.
        first = phases[phases["policy"] == phases["policy"].iloc[0]]
        fair_share_line(rate, first)
    rate.set_ylabel("multicast sending rate (Gbps)")
    rate.set_title(title, fontsize=9)
    rate.set_ylim(bottom=0)
    rate.grid(alpha=0.3)
    rate.legend(fontsize=8)
    queue.set_xlabel("time (ms)")
    queue.set_ylabel("fullest receiver\nqueue (KB)")
    queue.set_ylim(bottom=0)
    queue.grid(alpha=0.3)
    return fig
