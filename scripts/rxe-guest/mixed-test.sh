#!/usr/bin/env bash
# Mixed, first direction: a rocast software sender in a `rocast lab`
# namespace multicasts through `rocast switch` (Cepheus engine: replication, bridging, ACK
# aggregation) to three unmodified Soft-RoCE receivers: rxe guests under qemu TCG running
# rocast-verbs-member (verbs/), one ordinary RC QP each, connected to (McstID, QPN 1).
# Four groups in turn: SEND and WRITE, 100 buffers of 4 KB and 100 of 1 MB; every receiver's
# CRC-32 must match the sender's, and every guest must exit 0.
# Run as root. ROCAST_BIN: the rocast binary (default target/release/rocast, built if missing).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
. "$HERE/lib.sh"
T0=$(date +%s)
say() { echo "mixed-test: $*"; }

IMG=$(rxe_ensure_image)
ROCAST=$(rxe_rocast_bin "$REPO")
LAB=rxemix
LOGS=${ROCAST_RXE_LOGS:-/var/tmp/rocast-rxe-logs/mixed-$(date +%Y%m%d-%H%M%S)-$$}
mkdir -p "$LOGS"
export ROCAST_LOG_DIR=$LOGS ROCAST_BOOT_TIMEOUT=${ROCAST_BOOT_TIMEOUT:-300}
rxe_lab_start "$LAB" 1 "$LOGS" "$ROCAST"
NS=rocast-$LAB-sw
SOCK=$LOGS/switch.sock
# Port 0: the lab host h0 (10.77.0.1); ports 1-3: the guests, as QEMU dgram peers in the
# switch's namespace (its loopback carries their frames).
ARGS=(--port afpacket:p0 --host 10.77.0.1@0=02:72:63:00:00:01)
for i in 1 2 3; do
  ARGS+=(--port "dgram:127.0.0.1:4100$i=127.0.0.1:4110$i" --host "10.77.0.10$i@$i=52:54:00:77:00:0$i")
done
ip netns exec "$NS" "$ROCAST" switch "${ARGS[@]}" --control "$SOCK" --capture "$LOGS/pcap" >"$LOGS/switch.txt" 2>&1 &
SW=$!
RXE_PIDS+=($SW)
sleep 0.5

CASES=("send 4K 100" "send 1M 100" "write 4K 100" "write 1M 100")
for i in 1 2 3; do
  CMD="for n in 1 2 3 4; do rocast-verbs-member --bind 10.77.0.10$i --leader 10.77.0.1 --dev rxe0 --gid 1 --mtu 1024 --timeout 200 || exit 1; done"
  ip netns exec "$NS" "$HERE/boot.sh" "$IMG" "g$i" "10.77.0.10$i/24" "52:54:00:77:00:0$i" "4110$i" "4100$i" "$CMD" >"$LOGS/boot$i.txt" 2>&1 &
  RXE_PIDS+=($!)
  BOOTS[$i]=$!
done
fail=0
for c in "${CASES[@]}"; do
  set -- $c
  say "group: $1, $3 buffers of $2"
  if ! "$ROCAST" lab exec --name "$LAB" h0 -- "$ROCAST" mcast lead --bind 10.77.0.1 --members 3 \
      --size "$2" --repeat "$3" --op "$1" --mtu 1024 --rate-mbps 100 --timeout 200 >"$LOGS/lead-$1-$2.txt" 2>&1; then
    say "FAILED: $(tail -3 "$LOGS/lead-$1-$2.txt")"; fail=1; break
  fi
  ok=$(grep -c ': ok$' "$LOGS/lead-$1-$2.txt" || true)
  say "  $(grep -m1 '^multicast' "$LOGS/lead-$1-$2.txt" | sed 's/, latency [^,]*//')"
  say "  $ok member verdicts ok (expected $((3 * $3))); $(grep '^summary' "$LOGS/lead-$1-$2.txt" || true)"
  [ "$ok" = $((3 * $3)) ] || { fail=1; break; }
done
for i in 1 2 3; do
  if ! wait "${BOOTS[$i]}"; then say "guest g$i failed: $(tail -3 "$LOGS/boot$i.txt")"; fail=1; fi
  grep -h "hw_counters" "$LOGS/g$i.log" | sed "s/^/mixed-test: g$i /" || true
done
"$ROCAST" switch --stats --control "$SOCK" | grep -E '^(cepheus (data_in|replicas|bridged|acks_in|acks_out|naks_out)|switch (drop_|mrp_))' | grep -v ' 0$' | sed 's/^/mixed-test:   /' || true
kill "$SW" 2>/dev/null || true
wait "$SW" 2>/dev/null || true
rxe_check_captures "$ROCAST" "$LOGS/pcap" mixed-test || fail=1
say "$([ $fail = 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - T0 ))s; logs in $LOGS"
exit $fail
