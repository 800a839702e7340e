#!/usr/bin/env bash
# Measures the "time" column of the README's task table: runs each command once, as the
# README writes it, and prints its wall time with the machine it ran on, as a Markdown
# table to paste (or compare) there. The long figures' times come from `rocast bench sim`
# and `docs/repro/` instead (`rocast repro --list` has each one's).
#
#   bash scripts/readme-times.sh [ROCAST_BIN]
#
# Needs a release build (cargo build --release -p rocast-cli). Loopback only; every step
# has a deadline; a scratch directory under /tmp, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-$PWD/target/release/rocast}"
TMP="$(mktemp -d /tmp/rocast-readme-times.XXXXXX)"
SERVER=""
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

cores=$(nproc)
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
echo "# README times: $("$BIN" --version), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# machine: $cores cores, $mem, $cpu; $(date -u +%Y-%m-%d)"
echo
echo "| task | command | wall s |"
echo "|---|---|---:|"

# One row: a name, then the command (run with a 600 s deadline, output discarded).
row() {
  local name="$1"
  shift
  local t0 t1
  t0=$(date +%s.%N)
  if ! timeout 600 "$@" >"$TMP/out.txt" 2>"$TMP/err.txt"; then
    echo "| $name | \`rocast ${*:2}\` | failed: $(tail -1 "$TMP/err.txt") |"
    return
  fi
  t1=$(date +%s.%N)
  printf '| %s | `%s` | %.1f |\n' "$name" "rocast ${*:2}" "$(echo "$t1 - $t0" | bc)"
}

row "in-network multicast against the overlays" "$BIN" sim --preset multicast --quiet --out "$TMP/mc"
row "the default preset" "$BIN" sim --quiet --out "$TMP/default"
row "permutation-1024" "$BIN" sim --preset permutation-1024 --quiet --out "$TMP/perm"
row "list the presets" "$BIN" sim --list
row "OSU-style broadcast latency" "$BIN" bcast --group 8 --sizes 64:16M --out "$TMP/bcast"
row "RDMC's small-message protocol" "$BIN" bcast --smc --out "$TMP/smc"
row "a member failure" "$BIN" bcast --fail 3@100us --out "$TMP/fail"
row "a PEEL tree and its rules" "$BIN" tree --topo fat-tree:k=8 --dst random:16 --algo peel,optimal
row "check a capture" "$BIN" pcap check "$TMP/mc/capture.pcap"

# perftest-style, on loopback: one server for both rows.
"$BIN" perf server --loop --bind 127.0.0.71 --port 18571 --timeout 30 >/dev/null 2>&1 &
SERVER=$!
sleep 0.5
row "perftest-style bandwidth" "$BIN" perf client 127.0.0.71 --bind 127.0.0.72 --port 18571 -s 1M -n 1000
row "perftest-style sweep (-a)" "$BIN" perf client 127.0.0.71 --bind 127.0.0.72 --port 18571 -a
