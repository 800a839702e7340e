"""Plot a multicast's sending rate over time per CNP policy (rocast sim --preset
tmcf-cpmp or tmcf-moving).

Usage: plot_rate.py rate.csv rate.png "title"

The CSV has one row per sample: ms, policy, gbps (the multicast), u<k>_gbps (each
unicast), queue_kb (the fullest receiver downlink), pauses (PFC pauses so far). The
top panel is the multicast's rate, the bottom one the queue, one line per policy.
"""

import sys

from ._cli import run


def draw(df, title, plt):
    fig, (rate, queue) = plt.subplots(
        2, 1, figsize=(8, 5.5), sharex=True, gridspec_kw={"height_ratios": [2, 1]}
    )
    for policy, g in df.groupby("policy", sort=False):
        rate.plot(g["ms"], g["gbps"], label=policy, drawstyle="steps-post", linewidth=1)
        queue.plot(g["ms"], g["queue_kb"], label=policy, linewidth=0.8)
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


def main(argv=None):
    """The command line: `python -m rocast.plot.tmcf_rate CSV PNG TITLE` (PNG and SVG)."""
    argv = sys.argv if argv is None else argv
    return run(__doc__, draw, argv)


if __name__ == "__main__":
    sys.exit(main())
