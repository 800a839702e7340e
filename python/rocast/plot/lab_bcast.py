"""Plot broadcast on real packets (rocast bench lab-bcast).

Usage: python/plot.py lab_bcast lab-bcast.csv lab-bcast.png "title"

The CSV has one row per point: hosts, size (bytes), scheme, latency_us (the median of
the reps), goodput_gbps, cpu_s_per_gb (not plotted) and, for rocast's schemes,
latency_min_us and latency_max_us over the reps.
One column of panels per group size: latency against message size (log-log) above,
with min-max error bars where the reps give them, goodput below, one line per scheme.
"""



def draw(df, title, plt):
    groups = sorted(df["hosts"].unique())
    fig, axes = plt.subplots(2, len(groups), figsize=(5 * len(groups), 6.5), squeeze=False)
    for col, n in enumerate(groups):
        g = df[df["hosts"] == n]
        lat, put = axes[0, col], axes[1, col]
        for scheme, s in g.groupby("scheme", sort=False):
            s = s.sort_values("size")
            if "latency_min_us" in s and s["latency_min_us"].notna().all():
                err = [s["latency_us"] - s["latency_min_us"], s["latency_max_us"] - s["latency_us"]]
                lat.errorbar(s["size"], s["latency_us"], yerr=err, marker="o", label=scheme,
                             linewidth=1, capsize=2)
            else:
                lat.plot(s["size"], s["latency_us"], marker="o", label=scheme, linewidth=1)
            put.plot(s["size"], s["goodput_gbps"], marker="o", label=scheme, linewidth=1)
        lat.set_xscale("log", base=2)
        lat.set_yscale("log")
        lat.set_title(f"{title}: {n} hosts", fontsize=9)
        lat.set_ylabel("latency (µs)")
        lat.grid(alpha=0.3)
        lat.legend(fontsize=7)
        put.set_xscale("log", base=2)
        put.set_xlabel("message size (bytes)")
        put.set_ylabel("goodput (Gbit/s)")
        put.set_ylim(bottom=0)
        put.grid(alpha=0.3)
    return fig
