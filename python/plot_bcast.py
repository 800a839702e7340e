"""Latency-vs-size plot of `rocast bcast` output: one line per scheme.

usage: plot_bcast.py BCAST_CSV OUT_PNG [TITLE]
"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

LABELS = {
    "sequential": "sequential (N unicasts)",
    "tree": "binomial tree",
    "chain": "chain",
    "pipeline": "binomial pipeline (RDMC)",
    "ring": "ring (NCCL-style)",
}


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    df = pd.read_csv(argv[1])
    title = argv[3] if len(argv) > 3 else ""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for scheme, g in df.groupby("scheme", sort=False):
        g = g.sort_values("size_bytes")
        ax.plot(g["size_bytes"], g["latency_us"], marker="o", ms=3, label=LABELS.get(scheme, scheme))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("broadcast latency (µs)")
    ax.set_title(f"rocast bcast (simulated){': ' + title if title else ''}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(argv[2], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
