#!/usr/bin/env bash
# A CPU flame graph of one `rocast sim` run (profile before optimising).
#
#   scripts/flamegraph.sh OUT.svg [rocast sim arguments...]
#
# Default run: --preset permutation-1024. Needs `perf` (Debian: linux-perf) and
# inferno (`cargo install inferno`; the script installs it under ~/.cargo if missing).
# perf samples at 199 Hz with DWARF call stacks; the SVG's title records the
# command, the rocast commit and the sampling settings.
set -euo pipefail
out=${1:?usage: flamegraph.sh OUT.svg [rocast sim arguments...]}
shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--preset permutation-1024)
root=$(cd "$(dirname "$0")/.." && pwd)
command -v perf >/dev/null || { echo "flamegraph: perf not found (apt-get install linux-perf)" >&2; exit 2; }
export PATH="$HOME/.cargo/bin:$PATH"
command -v inferno-flamegraph >/dev/null || cargo install --locked inferno
cargo build --release -p rocast-cli --manifest-path "$root/Cargo.toml"
bin="$root/target/release/rocast"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
perf record -F 199 --call-graph dwarf,16384 -o "$tmp/perf.data" -- \
  "$bin" sim "${args[@]}" --quiet --out "$tmp/out" >/dev/null
perf script -i "$tmp/perf.data" 2>/dev/null | inferno-collapse-perf >"$tmp/folded"
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
inferno-flamegraph --title "rocast sim ${args[*]} (rocast $commit; perf -F 199, DWARF stacks; regenerate: scripts/flamegraph.sh $(basename "$out") ${args[*]})" \
  <"$tmp/folded" >"$out"
# Self time by the innermost rocast function (std frames inlined into it count as it).
awk '{n=$NF; $NF=""; k=split($0, f, ";"); r=f[k]; for (i=k; i>0; i--) if (f[i] ~ /rocast/) {r=f[i]; break}
      s[r]+=n; t+=n} END {for (x in s) printf "%6.2f%% %s\n", 100*s[x]/t, x}' "$tmp/folded" \
  | sort -rn | head -20
