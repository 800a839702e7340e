#!/usr/bin/env python3
"""rocast sim against csg-htsim's htsim_roce on the same topology and workload.

Provenance: hand-written; it writes every result file in this folder (results*.md,
results*.csv, fct-<case>*.csv, fct-cdf*.png) and stamps each with the command, the
rocast and htsim commits and the seeds that made it. Run from the repository root:

    nice -n 19 .venv/bin/python docs/validation/compare.py \
        --htsim /path/to/csg-htsim/sim/datacenter/htsim_roce --htsim-commit SHA --seed 1

Cases (scenario files beside this script): permutation-1024 (k=16 fat-tree, 2 MB
permutation), incast-64 (64 to 1, 256 KiB), leaf-spine-4to1 (4:1 leaf-spine, 2 MB
permutation) and leaf-spine-1spine (4:1 with a single spine: no ECMP in either
simulator). `--pfc-thresholds LOW HIGH` reruns them with other PFC thresholds.

htsim is not part of this repository: build it yourself (see README.md here) and pass
the binary's path. For each case the script

1. takes a connection matrix (htsim's format; `--cm FILE` with one `--cases` entry) or
   generates one from `--seed` (a permutation as htsim's gen_permutation.py makes it, or
   an incast to host 0);
2. converts it to a rocast flow file (HPCC format: count, then `src dst pg dport size
   start_s`) and, for the leaf-spine cases, writes htsim's topology file;
3. for each ECMP draw (`--ecmp-seeds`), runs htsim_roce (under `faketime`, see below)
   and then `rocast sim` on the case's scenario file here, one after the other, timing
   each (wall time, peak RSS);
4. parses htsim's "Flow Roce_S_D ID finished at T" lines and rocast's fct.txt, and
   writes FCT p50/p99/max (nearest rank, as rocast's experiment tables), mean FCT, mean
   slowdown and total completion side by side, the per-flow FCTs and a plot of the CDFs.

Determinism: rocast is deterministic for a seed. htsim_roce seeds its switches' ECMP
salts from -seed, but every RoceSrc constructor calls srand(time(NULL)) and draws its
ECMP path id from random(), so htsim's routing changes with the wall-clock second.
The script runs htsim under `faketime -f '2024-01-01 00:00:00'` (Debian package
faketime) so that it is repeatable; `--no-faketime` runs it bare (and says so).

Slowdown: FCT / ideal FCT (at least 1), each simulator against its own ideal: rocast's
standalone FCT from fct.txt, and for htsim the same store-and-forward formula with
htsim's packets (payload MTU + 64 B, every packet full size, 64-B ACK), which matches an
htsim run of a single flow to the picosecond.
"""

import argparse
import csv
import hashlib
import math
import os
import random
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FAKETIME = ["faketime", "-f", "2024-01-01 00:00:00"]
GBPS = 100
LINK_DELAY_PS = 1_000_000  # 1 µs per link
MTU = 1024
HTSIM_HDR = 64  # RocePacket::ACKSIZE: header bytes on data packets, and the ACK size
# rocast's wire bytes of a full data packet: payload, IPv4 20, UDP 8, BTH 12, ICRC 4, and
# Ethernet header, FCS, preamble and gap 38
ROCAST_FRAME = MTU + 20 + 8 + 12 + 4 + 38

LEAF_SPINE_TOPO = """# htsim topology for docs/validation case leaf-spine-4to1 (written by compare.py)
Nodes 128
Tiers 2
Podsize 128

Tier 0
Downlink_speed_Gbps 100
Radix_Down 16
Radix_Up 4
Downlink_Latency_ns 1000
Switch_Latency_ns 0
Oversubscribed 4

Tier 1
Downlink_speed_Gbps 100
Radix_Down 8
Downlink_Latency_ns 1000
Switch_Latency_ns 0
"""

LEAF_SPINE_1_TOPO = """# htsim topology for docs/validation case leaf-spine-1spine (written by compare.py)
Nodes 128
Tiers 2
Podsize 128

Tier 0
Downlink_speed_Gbps 100
Radix_Down 4
Radix_Up 1
Downlink_Latency_ns 1000
Switch_Latency_ns 0
Oversubscribed 4

Tier 1
Downlink_speed_Gbps 100
Radix_Down 32
Downlink_Latency_ns 1000
Switch_Latency_ns 0
"""


def fat_tree_hops(k):
    h = k // 2

    def hops(s, d):
        if s // h == d // h:
            return 2
        if s // (h * h) == d // (h * h):
            return 4
        return 6

    return hops


def leaf_spine_hops(per_leaf):
    return lambda s, d: 2 if s // per_leaf == d // per_leaf else 4


CASES = {
    "permutation-1024": dict(
        title="(a) k=16 fat-tree, 1024 hosts, 2 MB permutation",
        nodes=1024,
        htsim_topo=["-nodes", "1024", "-tiers", "3"],
        topo_file=None,
        workload=("permutation", 2_000_000),
        hops=fat_tree_hops(16),
    ),
    "incast-64": dict(
        title="(b) k=16 fat-tree, 64-to-1 incast of 256 KiB",
        nodes=1024,
        htsim_topo=["-nodes", "1024", "-tiers", "3"],
        topo_file=None,
        workload=("incast", 64, 262_144),
        hops=fat_tree_hops(16),
    ),
    "leaf-spine-4to1": dict(
        title="(c) 4:1 leaf-spine (8 leaves × 16 hosts, 4 spines), 2 MB permutation",
        nodes=128,
        htsim_topo=["-nodes", "128"],
        topo_file=LEAF_SPINE_TOPO,
        workload=("permutation", 2_000_000),
        hops=leaf_spine_hops(16),
    ),
    "leaf-spine-1spine": dict(
        title="(d) 4:1 leaf-spine without ECMP (32 leaves × 4 hosts, 1 spine), "
        "2 MB permutation",
        nodes=128,
        htsim_topo=["-nodes", "128"],
        topo_file=LEAF_SPINE_1_TOPO,
        workload=("permutation", 2_000_000),
        hops=leaf_spine_hops(4),
    ),
}


# ---------------------------------------------------------------- workloads


def gen_permutation(nodes, size, seed):
    """htsim's connection_matrices/gen_permutation.py, all flows starting at 0."""
    rng = random.Random(seed)
    srcs, dsts = list(range(nodes)), list(range(nodes))
    rng.shuffle(srcs)
    rng.shuffle(dsts)
    for n in range(nodes):
        if srcs[n] == dsts[n]:
            i = (n + 1) % nodes
            dsts[n], dsts[i] = dsts[i], dsts[n]
    return [(srcs[n], dsts[n], size) for n in range(nodes)]


def gen_incast(nodes, senders, size, seed):
    """htsim's gen_incast.py: `senders` random hosts (never 0) to host 0, at time 0."""
    rng = random.Random(seed)
    srcs = list(range(1, nodes))
    rng.shuffle(srcs)
    return [(s, 0, size) for s in srcs[:senders]]


def write_cm(path, nodes, flows):
    with open(path, "w") as f:
        print(f"Nodes {nodes}", file=f)
        print(f"Connections {len(flows)}", file=f)
        for i, (s, d, size) in enumerate(flows):
            print(f"{s}->{d} id {i + 1} start 0 size {size}", file=f)


CM_LINE = re.compile(r"^\s*(\d+)->(\d+)\s+(.*)$")


def read_cm(path):
    """htsim connection matrix -> (nodes, [(src, dst, size, start_ps)])."""
    nodes, flows = None, []
    for line in Path(path).read_text().splitlines():
        t = line.split()
        if not t or t[0].startswith("#"):
            continue
        if t[0].lower() == "nodes":
            nodes = int(t[1])
            continue
        m = CM_LINE.match(line)
        if not m:
            continue
        kv = m.group(3).split()
        attrs = dict(zip(kv[0::2], kv[1::2]))
        if "trigger" in attrs or "send_done_trigger" in attrs:
            sys.exit(f"{path}: triggers are not supported ({line.strip()})")
        flows.append((int(m.group(1)), int(m.group(2)), int(attrs["size"]),
                      int(float(attrs.get("start", 0)))))
    return nodes, flows


def write_flow_file(path, flows):
    """rocast flow-file (HPCC): count, then `src dst pg dport size start_s`."""
    with open(path, "w") as f:
        print(len(flows), file=f)
        for s, d, size, start_ps in flows:
            print(f"{s} {d} 3 100 {size} {start_ps / 1e12:.9f}", file=f)


# ---------------------------------------------------------------- running


def run_timed(cmd, stdout_path):
    """Runs cmd in stdout_path's folder (htsim writes idmap.txt into its working
    folder) with stdout+stderr to that file; returns (rc, wall_s, peak_rss_mib)."""
    t0 = time.perf_counter()
    with open(stdout_path, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                             cwd=Path(stdout_path).parent)
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    return os.waitstatus_to_exitcode(status), wall, ru.ru_maxrss / 1024.0


FINISH = re.compile(r"^Flow Roce_(\d+)_(\d+) (\d+) finished at ([0-9.eE+-]+) total bytes (\d+)")


def parse_htsim(path):
    """{(src, dst): [finish_us, ...]} from htsim_roce's stdout."""
    out = {}
    for line in Path(path).read_text(errors="replace").splitlines():
        m = FINISH.match(line)
        if m:
            out.setdefault((int(m.group(1)), int(m.group(2))), []).append(float(m.group(4)))
    return out


def host_of_ip(ip):
    return (ip >> 8) & 0xFFFF


def parse_rocast(path):
    """{(src, dst): [(fct_us, standalone_us), ...]} from rocast's fct.txt."""
    out = {}
    for line in Path(path).read_text().splitlines():
        t = line.split()
        if len(t) != 8:
            continue
        s, d = host_of_ip(int(t[0], 16)), host_of_ip(int(t[1], 16))
        out.setdefault((s, d), []).append((int(t[6]) / 1e3, int(t[7]) / 1e3))
    return out


def htsim_ideal_us(size, hops):
    """Store-and-forward ideal of an htsim RoCE flow: n full packets of MTU+64 B
    pipelined over `hops` 100 Gb/s links of 1 µs, then the 64-B ACK back."""
    n = max(1, math.ceil(size / MTU))
    pkt_ps = (MTU + HTSIM_HDR) * 8 * 1000 // GBPS
    ack_ps = HTSIM_HDR * 8 * 1000 // GBPS
    ps = hops * (pkt_ps + LINK_DELAY_PS) + (n - 1) * pkt_ps + hops * (ack_ps + LINK_DELAY_PS)
    return ps / 1e6


def rocast_pfc_sets(low, high):
    """`--set`s that give rocast's MMU htsim's static PFC thresholds `low`/`high` (in
    units of MTU bytes, counted over htsim's MTU+64-byte packets), in packets: htsim
    pauses at the P-th queued data packet and resumes at Q; rocast's frames are
    ROCAST_FRAME bytes, and its dynamic threshold (free buffer >> 16, no reserve,
    100 KB headroom per port) is made a static T by a buffer of T·2^16 + about 2 MB
    (the headrooms). None for htsim's defaults 12/15: the scenario files carry those."""
    if (low, high) == (12, 15):
        return None
    pkt = MTU + HTSIM_HDR
    p = high * MTU // pkt + 1
    q = (low * MTU - 1) // pkt
    t = p * ROCAST_FRAME - ROCAST_FRAME // 2
    off = t - (q * ROCAST_FRAME + ROCAST_FRAME // 2)
    buf_mb = (t * 65536 + 2_000_000) / 1048576
    return [f"switch.buffer_mb={buf_mb:.3f}", f"switch.resume_offset_bytes={off}"]


# ---------------------------------------------------------------- statistics


def nearest_rank(sorted_v, q):
    """rocast's crates/sim/src/output/stats.rs nearest_rank: the ceil(q*n)-th smallest."""
    if not sorted_v:
        return float("nan")
    r = min(max(math.ceil(q * len(sorted_v)), 1), len(sorted_v))
    return sorted_v[r - 1]


def htsim_rtx(path):
    m = re.search(r"^New: \d+ Rtx: (\d+)", Path(path).read_text(errors="replace"), re.M)
    return int(m.group(1)) if m else "?"


def rocast_rtx(summary):
    m = re.search(r'"retransmitted_packets":\s*(\d+)', Path(summary).read_text())
    return int(m.group(1)) if m else "?"


def stats(fcts, slows, starts_finishes, total):
    f = sorted(fcts)
    s = sorted(slows)
    last = max((fin for _, fin in starts_finishes), default=float("nan"))
    first = min((st for st, _ in starts_finishes), default=float("nan"))
    return {
        "flows finished": f"{len(f)}/{total}",
        "FCT p50 (us)": nearest_rank(f, 0.5),
        "FCT p99 (us)": nearest_rank(f, 0.99),
        "FCT max (us)": f[-1] if f else float("nan"),
        "FCT mean (us)": sum(f) / len(f) if f else float("nan"),
        "slowdown mean": sum(s) / len(s) if s else float("nan"),
        "slowdown p99": nearest_rank(s, 0.99),
        "total completion (us)": last - first,
    }


# ---------------------------------------------------------------- provenance


def git(*args):
    try:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def rocast_version():
    rev = git("rev-parse", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "crates", "Cargo.toml", "Cargo.lock",
                "docs/validation/compare.py", "docs/validation/*.toml")
    return rev + ("-dirty" if dirty else "")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def display_cmd(argv):
    """The command line with the repository root stripped from paths."""
    parts = []
    for a in argv:
        parts.append(a.replace(str(REPO) + "/", ""))
    return "nice -n 19 .venv/bin/python " + " ".join(shlex.quote(p) for p in parts)


def run_pair(name, c, d, cm, flow_file, flows, seed, htsim, rocast, wrap, per_flow, cdfs,
             pfc):
    """One htsim run and one rocast run of a case with ECMP seed `seed`."""
    d.mkdir(parents=True, exist_ok=True)
    hcmd = [htsim, *c["htsim_topo"]]
    if c["topo_file"]:
        topo = d / "htsim.topo"
        topo.write_text(c["topo_file"])
        hcmd += ["-topo", str(topo)]
    hcmd += ["-tm", str(cm), "-strat", "ecmp_host", "-paths", "1", "-mtu", str(MTU),
             "-linkspeed", str(GBPS * 1000), "-q", "10000", "-pfc_thresholds", str(pfc[0]), str(pfc[1]),
             "-end", "100000", "-seed", str(seed), "-o", str(d / "htsim-log.dat")]
    print(f"[{name} seed {seed}] htsim: {' '.join(wrap + hcmd)}", flush=True)
    h_rc, h_wall, h_rss = run_timed(wrap + hcmd, d / "htsim.out")
    if h_rc != 0:
        sys.exit(f"htsim exited {h_rc}; see {d / 'htsim.out'}")

    rdir = d / "rocast"
    rcmd = [rocast, "sim", str(HERE / f"{name}.toml"), "--set",
            f"workload.flow_file={flow_file}", "--seed", str(seed), "--out", str(rdir)]
    for kv in rocast_pfc_sets(*pfc) or []:
        rcmd += ["--set", kv]
    print(f"[{name} seed {seed}] rocast: {' '.join(rcmd)}", flush=True)
    r_rc, r_wall, r_rss = run_timed(rcmd, d / "rocast.out")
    if r_rc != 0:
        sys.exit(f"rocast exited {r_rc}; see {d / 'rocast.out'}")

    hfin = parse_htsim(d / "htsim.out")
    rfin = parse_rocast(rdir / "fct.txt")
    h_f, h_s, h_sf, r_f, r_s, r_sf, rows = [], [], [], [], [], [], []
    seen = {}
    for s, dst, size, start_ps in flows:
        k = seen.get((s, dst), 0)
        seen[(s, dst)] = k + 1
        st = start_ps / 1e6
        hv = hfin.get((s, dst), [])
        rv = rfin.get((s, dst), [])
        h_fct = hv[k] - st if k < len(hv) else None
        r_fct, r_ideal = rv[k] if k < len(rv) else (None, None)
        h_ideal = htsim_ideal_us(size, c["hops"](s, dst))
        if h_fct is not None:
            h_f.append(h_fct)
            h_s.append(max(1.0, h_fct / h_ideal))
            h_sf.append((st, st + h_fct))
        if r_fct is not None:
            r_f.append(r_fct)
            if r_ideal:
                r_s.append(max(1.0, r_fct / r_ideal))
            r_sf.append((st, st + r_fct))
        rows.append((s, dst, size, h_fct, h_ideal, r_fct, r_ideal))
    hs = stats(h_f, h_s, h_sf, len(flows))
    rs = stats(r_f, r_s, r_sf, len(flows))
    hs["retransmitted packets"] = str(htsim_rtx(d / "htsim.out"))
    rs["retransmitted packets"] = str(rocast_rtx(rdir / "summary.json"))
    if name not in per_flow:
        per_flow[name] = (seed, rows)
    cdfs[name].append((seed, sorted(h_f), sorted(r_f)))
    print(f"[{name} seed {seed}] htsim {h_wall:.2f} s, rocast {r_wall:.2f} s, "
          f"p99 {hs['FCT p99 (us)']:.1f} vs {rs['FCT p99 (us)']:.1f} us", flush=True)
    return (seed, hs, rs, (h_wall, h_rss), (r_wall, r_rss))


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--htsim", required=True, help="path of the htsim_roce binary")
    ap.add_argument("--htsim-commit", default="unknown",
                    help="csg-htsim commit the binary was built from (for provenance)")
    ap.add_argument("--rocast", default=str(REPO / "target/release/rocast"),
                    help="rocast binary (default target/release/rocast)")
    ap.add_argument("--cases", default=",".join(CASES),
                    help="comma-separated subset of: " + ", ".join(CASES))
    ap.add_argument("--cm", help="htsim connection matrix to use instead of generating "
                    "one (only with a single case)")
    ap.add_argument("--seed", type=int, default=1,
                    help="seed of the generated connection matrices")
    ap.add_argument("--ecmp-seeds", default="1,2,3,4,5,6,7,8,9,10",
                    help="ECMP draws: for each seed k one htsim run with -seed k (its "
                    "switches' ECMP salts) and one rocast run with --seed k on the flow "
                    "file's lines shuffled by k (rocast's ECMP hash takes the UDP source "
                    "port, which follows the flow's index); the first seed gives the "
                    "per-flow table and the main curves")
    ap.add_argument("--out", default=str(HERE), help="where result files go")
    ap.add_argument("--work", default="/tmp/rocast-htsim-validation",
                    help="scratch folder for matrices, flow files and raw outputs")
    ap.add_argument("--pfc-thresholds", nargs=2, type=int, default=[12, 15],
                    metavar=("LOW", "HIGH"),
                    help="htsim's -pfc_thresholds (default 12 15, htsim's own); other "
                    "values are mapped onto rocast's MMU (same packet counts) and the "
                    "result files get a -pfcLOW-HIGH suffix")
    ap.add_argument("--no-faketime", action="store_true",
                    help="run htsim without faketime (its ECMP then varies run to run)")
    args = ap.parse_args()

    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c!r}; cases: {', '.join(CASES)}")
    if args.cm and len(cases) != 1:
        ap.error("--cm needs exactly one case in --cases")
    htsim = str(Path(args.htsim).resolve())
    rocast = str(Path(args.rocast).resolve())
    wrap = [] if args.no_faketime else FAKETIME
    if wrap and subprocess.run(["which", "faketime"], capture_output=True).returncode:
        sys.exit("faketime not found: apt-get install faketime, or pass --no-faketime")
    out_dir, work = Path(args.out), Path(args.work)
    out_dir.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)

    cmd = display_cmd(sys.argv)
    prov = [
        f"command: {cmd}",
        f"rocast: {rocast_version()}",
        f"htsim: csg-htsim {args.htsim_commit}, htsim_roce sha256 {sha256(htsim)[:16]}"
        + ("" if wrap else " (run without faketime: not repeatable)"),
        f"seed: {args.seed} (connection matrices); ECMP seeds {args.ecmp_seeds}; "
        f"PFC thresholds {args.pfc_thresholds[0]}/{args.pfc_thresholds[1]} (htsim units)",
    ]
    print("\n".join(prov), flush=True)

    seeds = [int(x) for x in args.ecmp_seeds.split(",") if x.strip()] or [args.seed]
    pfc = tuple(args.pfc_thresholds)
    suffix = "" if pfc == (12, 15) else f"-pfc{pfc[0]}-{pfc[1]}"
    if pfc[0] >= pfc[1] or pfc[0] < 1:
        ap.error("--pfc-thresholds needs 1 <= LOW < HIGH")
    results = []  # (case, [(seed, htsim stats, rocast stats, (wall, rss), (wall, rss))])
    per_flow = {}
    cdfs = {}
    for name in cases:
        c = CASES[name]
        d = work / name
        d.mkdir(parents=True, exist_ok=True)
        cm = d / "matrix.cm"
        if args.cm:
            cm = Path(args.cm).resolve()
        else:
            w = c["workload"]
            if w[0] == "permutation":
                flows = gen_permutation(c["nodes"], w[1], args.seed)
            else:
                flows = gen_incast(c["nodes"], w[1], w[2], args.seed)
            write_cm(cm, c["nodes"], flows)
        nodes, flows = read_cm(cm)
        if nodes != c["nodes"]:
            sys.exit(f"{cm}: {nodes} nodes, case {name} has {c['nodes']}")
        if any(st != 0 for *_, st in flows):
            # htsim_roce starts every flow at time 0 whatever the matrix says
            # (RoceSrc::connect calls startflow() at once).
            sys.exit(f"{cm}: htsim_roce ignores start times; use start 0")
        runs = []
        cdfs[name] = []
        for seed in seeds:
            # rocast hashes ECMP on the 5-tuple with per-switch seeds (as HPCC's
            # simulator), not on the scenario seed; the UDP source port comes from the
            # flow's index, so a draw is an order of the flow file's lines.
            order = list(flows)
            random.Random(seed).shuffle(order)
            flow_file = d / f"flows-seed{seed}.txt"
            write_flow_file(flow_file, order)
            runs.append(run_pair(name, c, d / f"seed{seed}", cm, flow_file, flows, seed,
                                 htsim, rocast, wrap, per_flow, cdfs, pfc))
        results.append((name, runs))

    write_outputs(out_dir, prov, results, per_flow, cdfs, suffix)


def pct(a, b):
    if not (isinstance(a, float) and isinstance(b, float)) or a == 0 or math.isnan(a):
        return ""
    return f"{(b - a) / a * 100:+.1f}%"


def fmt(v):
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def same_or_list(vals):
    return f"{vals[0]} in all" if len(set(vals)) == 1 else ", ".join(vals)


def spread(vals):
    """mean [min, max] of numeric values."""
    m = sum(vals) / len(vals)
    return m, f"{m:.2f} [{min(vals):.2f}, {max(vals):.2f}]"


def write_outputs(out_dir, prov, results, per_flow, cdfs, suffix):
    head = ["# " + p for p in prov]
    md = ["# rocast vs htsim_roce: results", "", "Generated by compare.py; do not edit.", ""]
    md += ["    " + p for p in prov] + [""]
    csv_rows = []
    for name, runs in results:
        seed0, hs, rs, (hw, hr), (rw, rr) = runs[0]
        md += [f"## {CASES[name]['title']}", "",
               f"ECMP seed {seed0}, then mean [min, max] over ECMP seeds "
               f"{', '.join(str(r[0]) for r in runs)}.", "",
               f"| metric | htsim seed {seed0} | rocast seed {seed0} | rocast vs htsim "
               f"| htsim, {len(runs)} seeds | rocast, {len(runs)} seeds | rocast vs htsim |",
               "|---|---:|---:|---:|---:|---:|---:|"]
        for k in hs:
            row = f"| {k} | {fmt(hs[k])} | {fmt(rs[k])} | {pct(hs[k], rs[k])} |"
            if isinstance(hs[k], float):
                hm, htxt = spread([r[1][k] for r in runs])
                rm, rtxt = spread([r[2][k] for r in runs])
                row += f" {htxt} | {rtxt} | {pct(hm, rm)} |"
            else:
                row += f" {same_or_list([r[1][k] for r in runs])} | " \
                       f"{same_or_list([r[2][k] for r in runs])} | |"
            md.append(row)
        hwm, hwt = spread([r[3][0] for r in runs])
        rwm, rwt = spread([r[4][0] for r in runs])
        ratios = sorted(r[3][0] / r[4][0] for r in runs)
        med = ratios[(len(ratios) - 1) // 2] if len(ratios) % 2 else \
            (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
        md.append(f"| wall time (s) | {hw:.2f} | {rw:.2f} | htsim/rocast = {hw / rw:.2f} "
                  f"| {hwt} | {rwt} | htsim/rocast: {hwm / rwm:.2f} (means), "
                  f"{med:.2f} [{ratios[0]:.2f}, {ratios[-1]:.2f}] (median of draws) |")
        md.append(f"| peak RSS (MiB) | {hr:.0f} | {rr:.0f} | | "
                  f"{max(r[3][1] for r in runs):.0f} (max) | {max(r[4][1] for r in runs):.0f} (max) | |")
        md.append("")
        for seed, hs_, rs_, (hw_, hr_), (rw_, rr_) in runs:
            for k in hs_:
                csv_rows.append((name, seed, k, hs_[k], rs_[k]))
            csv_rows += [(name, seed, "wall time (s)", round(hw_, 3), round(rw_, 3)),
                         (name, seed, "peak RSS (MiB)", round(hr_, 1), round(rr_, 1))]
    (out_dir / f"results{suffix}.md").write_text("\n".join(md) + "\n")
    with open(out_dir / f"results{suffix}.csv", "w", newline="") as f:
        f.write("\n".join(head) + "\n")
        w = csv.writer(f)
        w.writerow(["case", "ecmp_seed", "metric", "htsim", "rocast"])
        for r in csv_rows:
            w.writerow(list(r[:3]) + [f"{v:.4f}" if isinstance(v, float) else v for v in r[3:]])
    for name, (seed, rows) in per_flow.items():
        with open(out_dir / f"fct-{name}{suffix}.csv", "w", newline="") as f:
            f.write("\n".join(head + [f"# ECMP seed {seed}"]) + "\n")
            w = csv.writer(f)
            w.writerow(["src", "dst", "size", "htsim_fct_us", "htsim_ideal_us",
                        "rocast_fct_us", "rocast_ideal_us"])
            for s, d, size, hf, hi, rf, ri in rows:
                w.writerow([s, d, size, "" if hf is None else f"{hf:.3f}", f"{hi:.3f}",
                            "" if rf is None else f"{rf:.3f}", "" if ri is None else f"{ri:.3f}"])
    plot(out_dir / f"fct-cdf{suffix}.png", prov, cdfs)


def plot(path, prov, cdfs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(cdfs)
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.6 * rows + 0.8),
                             squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax, (name, runs) in zip(axes.flat, cdfs.items()):
        for i, (seed, h, r) in enumerate(runs):
            for v, label, color in ((h, "htsim_roce", "C0"), (r, "rocast sim", "C1")):
                if not v:
                    continue
                y = [(j + 1) / len(v) for j in range(len(v))]
                if i == 0:
                    ax.step(v, y, color=color, where="post", lw=1.8,
                            label=f"{label}, seed {seed}")
                else:
                    ax.step(v, y, color=color, where="post", lw=0.7, alpha=0.35,
                            label=f"{label}, other seeds" if i == 1 else None)
        ax.set_title(CASES[name]["title"], fontsize=9)
        ax.set_xlabel("FCT (µs)")
        ax.set_ylabel("fraction of flows")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=7)
    fig.text(0.01, 0.01, "\n".join(prov), fontsize=6, va="bottom", family="monospace")
    fig.tight_layout(rect=(0, 0.8 / (4.6 * rows + 0.8), 1, 1))
    fig.savefig(path, dpi=110, metadata={"Description": "\n".join(prov)})
    plt.close(fig)


if __name__ == "__main__":
    main()
