#!/usr/bin/env bash
# The broadcast-select paper's Fig. 4 measurement, on stock Soft-RoCE: perftest's
# ib_send_lat over RC (2 B to 64 KiB) and UD (2 B to 4 KiB, the 4096 B MTU), between two
# rxe guests under qemu TCG connected back to back (-netdev dgram over loopback UDP).
# perftest reports half the round trip (the two guests share no clock), so these are
# round trips halved, as in the paper's figure.
# Writes OUT (default $LOGS/fig4-rxe.csv): transport,size_bytes,iterations,t_min_us,
# t_typical_us,t_avg_us,t_p99_us,t_p999_us, preceded by '#' lines saying how it was made.
# Run as root. Environment: ROCAST_FIG4_OUT (OUT), ROCAST_FIG4_ITERS (default 200),
# ROCAST_RXE_LOGS, ROCAST_BOOT_TIMEOUT (default 900).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
. "$HERE/lib.sh"
T0=$(date +%s)
say() { echo "fig4-latency: $*"; }
IMG=$(rxe_ensure_image)
LOGS=${ROCAST_RXE_LOGS:-/var/tmp/rocast-rxe-logs/fig4-$(date +%Y%m%d-%H%M%S)-$$}
OUT=${ROCAST_FIG4_OUT:-$LOGS/fig4-rxe.csv}
ITERS=${ROCAST_FIG4_ITERS:-200}
mkdir -p "$LOGS"
export ROCAST_BOOT_TIMEOUT=${ROCAST_BOOT_TIMEOUT:-900} ROCAST_LOG_DIR=$LOGS ROCAST_MTU=4200
RXE_LOGS=$LOGS
rxe_raise_rmem
trap rxe_guests_cleanup EXIT

RC_SIZES="2 4 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768 65536"
UD_SIZES="2 4 8 16 32 64 128 256 512 1024 2048 4096"
# Each size is its own ib_send_lat run on its own TCP port, so that a client never meets
# the server of the previous size; the client retries until its server listens.
loop() {  # loop SIDE: the guest command for "server" or "client" (one short sh loop)
  local run="ib_send_lat -d rxe0 -x 1 -F -c \$t -s \$s -n $ITERS -p \$p"
  if [ "$1" = client ]; then
    run="i=0; until $run 10.88.0.1; do i=\$((i+1)); [ \$i -ge 60 ] && exit 1; sleep 1; done"
  else
    run="$run >/dev/null || exit 1"
  fi
  echo "p=18600; for t in RC UD; do S='$RC_SIZES'; [ \$t = UD ] && S='$UD_SIZES'; for s in \$S; do p=\$((p+1)); $run; done; done"
}
# A listens (server), B measures (client); A's frames go to B's UDP port and back.
"$HERE/boot.sh" "$IMG" f4-A 10.88.0.1/24 52:54:00:88:00:01 45201 45202 "$(loop server)" \
  >"$LOGS/boot-A.txt" 2>&1 &
a=$!; RXE_PIDS+=("$a")
"$HERE/boot.sh" "$IMG" f4-B 10.88.0.2/24 52:54:00:88:00:02 45202 45201 "$(loop client)" \
  >"$LOGS/boot-B.txt" 2>&1 &
b=$!; RXE_PIDS+=("$b")
set +e; wait "$a"; ra=$?; wait "$b"; rb=$?; set -e
cat "$LOGS/boot-A.txt" "$LOGS/boot-B.txt" | sed 's/^/  /'
if [ "$ra" != 0 ] || [ "$rb" != 0 ]; then
  say "FAIL: server exit $ra, client exit $rb"
  tr -d '\r' <"$LOGS/f4-B.log" | tail -n 30 | sed 's/^/  | /'
  exit 1
fi
# perftest's result lines, in run order: RC sizes, then UD sizes.
{
  echo "# stock Soft-RoCE (rdma_rxe, $(tr -d '\r' <"$LOGS/f4-B.log" | sed -n 's/^rocast-init: \([^ ]*\) up.*/kernel \1/p' | head -n1)) in two qemu TCG guests"
  echo "# back to back, ib_send_lat -x 1 -F -n $ITERS per size; half round trips (perftest)."
  echo "# Made by scripts/rxe-guest/fig4-latency.sh on $(date -u +%Y-%m-%d), host $(nproc) cores;"
  echo "# image: $(tr '\n' ' ' <"$IMG/versions" | cut -c1-300)"
  echo "transport,size_bytes,iterations,t_min_us,t_typical_us,t_avg_us,t_p99_us,t_p999_us"
  tr -d '\r' <"$LOGS/f4-B.log" | awk -v rc="$(echo $RC_SIZES | wc -w)" '
    $1 ~ /^[0-9]+$/ && NF >= 9 && $2 ~ /^[0-9]+$/ {
      n++; t = (n <= rc) ? "RC" : "UD"
      printf "%s,%s,%s,%s,%s,%s,%s,%s\n", t, $1, $2, $3, $5, $6, $8, $9
    }'
} >"$OUT"
rows=$(grep -c '^[RU][CD],' "$OUT" || true)
want=$(( $(echo $RC_SIZES | wc -w) + $(echo $UD_SIZES | wc -w) ))
sed 's/^/  /' "$OUT"
[ "$rows" = "$want" ] || { say "FAIL: $rows result lines, expected $want"; exit 1; }
say "wrote $OUT; PASS in $(( $(date +%s) - T0 )) s"
