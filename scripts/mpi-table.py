"""docs/runtime/mpi.md from scripts/mpi-compare.sh's CSV: Open MPI's MPI_Bcast against
the same program with librocast_mpi, per rank count and size.

    .venv/bin/python scripts/mpi-table.py docs/runtime/mpi.csv RATE COMMIT > docs/runtime/mpi.md
"""
import sys

import pandas as pd


def size_label(b):
    for unit, k in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << k and b % (1 << k) == 0:
            return f"{b >> k} {unit}"
    return f"{b} B"


def main(csv, rate, commit):
    df = pd.read_csv(csv)
    out = [
        "# Unmodified MPI programs' MPI_Bcast: Open MPI against librocast_mpi",
        "",
        f"Made by `sudo bash scripts/mpi-compare.sh {rate}` (rocast 0.1.0, commit `{commit}`; no seed: "
        "measured wall and CPU times, which vary run to run) on this project's 2-core VM, in one run on "
        f"one lab: 8 namespace hosts on `rocast switch` (release build), links shaped at {rate}, "
        "Open MPI 4.1.4 (Debian) over TCP (`btl tcp,self`, `mpi_yield_when_idle 1`). The program is "
        "`mpi/bcast_check` (osu_bcast's loop; every rank checks every byte of every call): per size "
        "one warm-up call and 5 timed ones, each after a barrier; **median** is the median over the "
        "5 calls of the time from the root's call until the last rank returned (one kernel's "
        "CLOCK_MONOTONIC); **CPU s/GB** is the CPU time of all ranks together per GB delivered to "
        "the receivers. `rocast-*` is the same binary with `LD_PRELOAD=librocast_mpi.so` and "
        "`ROCAST_MPI_THRESHOLD=1` (every size through the switch): `rocast-daemon` with the switch "
        "daemon making every copy, `rocast-fast-path` on the lab brought up again with `--fast-path` "
        "(the kernel replicates the group's new data), measured after the others; `open-mpi` is Open MPI's own "
        "decision; `ompi-NAME` forces coll_tuned's algorithm NAME with 128 KiB segments.",
        "",
    ]
    for ranks, g in df.groupby("ranks", sort=True):
        piv = g.pivot(index="size_bytes", columns="variant", values="median_us")
        cpu = g.pivot(index="size_bytes", columns="variant", values="cpu_s_per_gb")
        forced = [c for c in piv.columns if c.startswith("ompi-")]
        out += [f"## {ranks} ranks", "",
                "| size | rocast fast-path µs | rocast daemon µs | open-mpi µs | best forced algorithm µs | "
                "open-mpi / rocast fast-path | best of Open MPI / rocast fast-path | CPU s/GB: rocast fast-path, "
                "daemon, open-mpi |",
                "|---|---|---|---|---|---|---|---|"]
        for size, row in piv.iterrows():
            best = row[forced].idxmin()
            best_all = min(row["open-mpi"], row[best])
            r = row["rocast-fast-path"]
            out.append(
                f"| {size_label(size)} | {r:.0f} | {row['rocast-daemon']:.0f} | {row['open-mpi']:.0f} | "
                f"{row[best]:.0f} ({best[5:]}) | {row['open-mpi'] / r:.2f} | {best_all / r:.2f} | "
                f"{cpu.loc[size, 'rocast-fast-path']:.2f}, {cpu.loc[size, 'rocast-daemon']:.2f}, "
                f"{cpu.loc[size, 'open-mpi']:.2f} |")
        out += ["", f"Every variant at {ranks} ranks (median µs):", "",
                "| size | " + " | ".join(piv.columns) + " |",
                "|---|" + "---|" * len(piv.columns)]
        for size, row in piv.iterrows():
            out.append(f"| {size_label(size)} | " + " | ".join(f"{v:.0f}" for v in row) + " |")
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
