#!/usr/bin/env bash
# Runs every `rocast sim` preset with one binary and keeps what each printed and wrote,
# so two builds can be compared with scripts/preset-diff.py (a refactor must
# leave every preset's output unchanged).
#
#   scripts/preset-outputs.sh BIN OUTDIR [PRESET...]
#
# Without PRESET names, every preset the binary lists runs. Each preset gets
# OUTDIR/NAME.stdout, OUTDIR/NAME.time (status and wall milliseconds) and its files under OUTDIR/NAME/.
set -uo pipefail
bin=${1:?usage: preset-outputs.sh BIN OUTDIR [PRESET...]}
out=${2:?usage: preset-outputs.sh BIN OUTDIR [PRESET...]}
shift 2
mkdir -p "$out"
if [ $# -gt 0 ]; then
  presets=("$@")
else
  # The binary names its presets in the error for an unknown one.
  list=$("$bin" sim --preset '?' 2>&1 | sed -n 's/.*presets: //p')
  IFS=', ' read -r -a presets <<<"$list"
fi
[ ${#presets[@]} -gt 0 ] || { echo "preset-outputs: no presets found" >&2; exit 2; }
rc=0
for p in "${presets[@]}"; do
  [ -n "$p" ] || continue
  start=$(date +%s%N)
  if "$bin" sim --preset "$p" --quiet --out "$out/$p" >"$out/$p.stdout" 2>"$out/$p.stderr"; then
    status=ok
  else
    status="exit $?"; rc=1
  fi
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "$status $ms" >"$out/$p.time"
  echo "$p: $status, $ms ms"
done
exit $rc
