#!/usr/bin/env bash
# Sanity check against a real peer: Open MPI 4.1's MPI_Bcast algorithms,
# measured on shared memory on this machine, against rocast's simulated ordering of
# the same schemes, for 4 and 8 ranks at 64 B and 16 MiB. A script, not a test: the
# figures are timings of an oversubscribed 2-core machine.
#
#   bash scripts/ompi-bcast-compare.sh            # writes out/ompi-compare/*.txt
#
# Scheme ↔ Open MPI algorithm (coll_tuned_bcast_algorithm):
#   sequential ↔ 1 basic_linear      tree ↔ 6 binomial (whole message per hop)
#   chain      ↔ 2 chain (1 MiB segments, as rocast's --block)
#   ring       ↔ 3 pipeline (a segmented chain; 512 KiB segments, as --ring-slice)
#   pipeline   ↔ no Open MPI counterpart; shown beside 8 scatter_allgather and
#                5 binary tree for reference.
set -euo pipefail
source "$(dirname "$0")/prepare.sh"

if ! command -v mpirun >/dev/null 2>&1; then
  echo "ompi-compare: apt-get install openmpi-bin"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null
fi
if ! .venv/bin/python -c 'import mpi4py, numpy' >/dev/null 2>&1; then
  echo "ompi-compare: pip install mpi4py numpy"
  .venv/bin/pip install -q --disable-pip-version-check mpi4py==4.1.2 numpy
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT=out/ompi-compare
mkdir -p "$OUT"
SIZES="64 16777216"

declare -A SEG=([1]=0 [2]=1048576 [3]=524288 [5]=0 [6]=0 [8]=0)
declare -A NAME=([1]=basic_linear [2]=chain [3]=pipeline [5]=binary_tree [6]=binomial [8]=scatter_allgather)
declare -A PEER=([1]=sequential [2]=chain [3]=ring [6]=tree)

# Two Open MPI transports: shared memory (vader, single-copy reads from the root's
# buffer) and TCP over loopback (every send costs the sender a copy, closer to a NIC
# that carries each copy).
for np in 4 8; do
  for btl in vader tcp; do
    : >"$OUT/ompi-$btl-$np.txt"
    for alg in 1 2 3 5 6 8; do
      mpirun --oversubscribe -np "$np" --mca btl "self,$btl" --mca btl_tcp_if_include lo \
        --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_bcast_algorithm "$alg" \
        --mca coll_tuned_bcast_algorithm_segmentsize "${SEG[$alg]}" \
        .venv/bin/python python/mpi_bcast.py $SIZES |
        while read -r size _ us; do echo "$alg ${NAME[$alg]} $size $us"; done >>"$OUT/ompi-$btl-$np.txt"
    done
  done
  "$R" bcast --group "$np" --sizes 64,16M --out "$OUT/rocast-$np" >"$OUT/rocast-$np.txt"
done

.venv/bin/python - "$OUT" <<'PY'
import csv, sys
out = sys.argv[1]
peer = {"1": "sequential", "2": "chain", "3": "ring", "6": "tree"}
for np_, btl in ((4, "vader"), (4, "tcp"), (8, "vader"), (8, "tcp")):
    ompi = {}
    for line in open(f"{out}/ompi-{btl}-{np_}.txt"):
        alg, name, size, us = line.split()
        ompi[(alg, int(size))] = (name, float(us))
    sim = {}
    for row in csv.DictReader(open(f"{out}/rocast-{np_}/bcast.csv")):
        sim[(row["scheme"], int(row["size_bytes"]))] = float(row["latency_us"])
    print(f"== {np_} ranks, Open MPI over {btl} ==")
    for size in (64, 16777216):
        o = sorted(((ompi[(a, size)][1], s) for a, s in peer.items()))
        r = sorted(((sim[(s, size)], s) for s in peer.values()))
        print(f"  {size:>9} B  Open MPI ({btl:>5}):       " + " < ".join(f"{s} {v:.1f}us" for v, s in o))
        print(f"  {size:>9} B  rocast (simulated 100G):  " + " < ".join(f"{s} {v:.1f}us" for v, s in r))
        print(f"  {size:>9} B  winner: Open MPI {o[0][1]}, rocast {r[0][1]}"
              f"{'  (same)' if o[0][1] == r[0][1] else '  (DIFFERENT)'}; same full order: {[s for _, s in o] == [s for _, s in r]}")
        extra = ", ".join(f"{ompi[(a, size)][0]} {ompi[(a, size)][1]:.1f}us" for a in ("5", "8"))
        print(f"  {size:>9} B  reference: rocast pipeline {sim[('pipeline', size)]:.1f}us; Open MPI {extra}")
PY
