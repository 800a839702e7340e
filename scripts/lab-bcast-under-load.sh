#!/usr/bin/env bash
# The runtime's load check: `rocast bench lab-bcast --hosts 8 --sizes 64,16M --reps 5`
# N times in a row while two `rocast sim --preset permutation-1024` processes keep both
# cores of a 2-core machine busy. A member that falls behind must slow the sender, never
# fail the group: every run must complete.
#
#   sudo scripts/lab-bcast-under-load.sh [N=10] [OUT=out/lab-bcast-under-load]
#
# Prints one line per run (ok, or the first line that says why not, and its wall time)
# and "K of N completed"; exits 0 only when all N completed. Each run's output is in
# OUT/runI.log. Every step has a deadline; the simulators are stopped on exit.
set -u
N=${1:-10}
OUT=${2:-out/lab-bcast-under-load}
BIN=${ROCAST_BIN:-target/release/rocast}
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release -p rocast-cli" >&2; exit 2; }
mkdir -p "$OUT"
load() {
    while true; do
        timeout 600 "$BIN" sim --preset permutation-1024 --quiet --no-plot \
            --out "$OUT/sim$1" >/dev/null 2>&1
    done
}
load 1 & L1=$!
load 2 & L2=$!
cleanup() {
    kill "$L1" "$L2" 2>/dev/null
    pkill -f -- "--out $OUT/sim" 2>/dev/null
}
trap cleanup EXIT
echo "# lab-bcast --hosts 8 --sizes 64,16M --reps 5, $N runs beside two rocast sim" \
    "(rocast $(git describe --always --dirty 2>/dev/null || echo unknown), $(date -u +%F))"
ok=0
for i in $(seq 1 "$N"); do
    start=$(date +%s)
    if timeout 600 "$BIN" bench lab-bcast --hosts 8 --sizes 64,16M --reps 5 \
        --out "$OUT/run$i" >"$OUT/run$i.log" 2>&1; then
        r=ok
        ok=$((ok + 1))
    else
        r="FAILED: $(grep -m1 -iE 'evicted|failed|error' "$OUT/run$i.log")"
    fi
    echo "run $i: $r ($(($(date +%s) - start)) s)"
done
echo "$ok of $N completed"
[ "$ok" -eq "$N" ]
