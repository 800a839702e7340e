#!/usr/bin/env bash
# Mixed, second direction: an unmodified Soft-RoCE sender (an rxe
# guest running rocast-verbs-lead: controller and sender on libibverbs) multicasts through
# `rocast switch` (Cepheus engine) to three rocast software receivers (`rocast mcast join`
# in `rocast lab` namespaces). SEND and WRITE, 100 buffers of 4 KB and 100 of 1 MB; every
# receiver must report every buffer intact, and every frame on every link (captured in
# the switch) must pass `rocast pcap check`.
# Run as root. ROCAST_BIN: the rocast binary (default target/release/rocast, built if missing).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
. "$HERE/lib.sh"
T0=$(date +%s)
say() { echo "mixed-reverse-test: $*"; }

IMG=$(rxe_ensure_image)
ROCAST=$(rxe_rocast_bin "$REPO")
LAB=rxerev
LOGS=${ROCAST_RXE_LOGS:-/var/tmp/rocast-rxe-logs/mixedrev-$(date +%Y%m%d-%H%M%S)-$$}
mkdir -p "$LOGS"
export ROCAST_LOG_DIR=$LOGS ROCAST_BOOT_TIMEOUT=${ROCAST_BOOT_TIMEOUT:-300}
rxe_lab_start "$LAB" 3 "$LOGS" "$ROCAST"
NS=rocast-$LAB-sw
SOCK=$LOGS/switch.sock
# Ports 0-2: the lab hosts h0..h2 (10.77.0.1-3); port 3: the rxe sender, a QEMU dgram peer
# in the switch's namespace.
ARGS=()
for i in 0 1 2; do
  ARGS+=(--port "afpacket:p$i" --host "10.77.0.$((i + 1))@$i=02:72:63:00:00:0$((i + 1))")
done
ARGS+=(--port "dgram:127.0.0.1:43003=127.0.0.1:43103" --host "10.77.0.100@3=52:54:00:79:00:00")
ip netns exec "$NS" "$ROCAST" switch "${ARGS[@]}" --control "$SOCK" --capture "$LOGS/pcap" >"$LOGS/switch.txt" 2>&1 &
SW=$!
RXE_PIDS+=($SW)
sleep 0.5

# "op size count"
CASES=("send 4096 100" "send 1048576 100" "write 4096 100" "write 1048576 100")
LEAD="rocast-verbs-lead --bind 10.77.0.100 --members 3 --dev rxe0 --gid 1 --mtu 1024 --timeout 200"
CMD=""
for c in "${CASES[@]}"; do
  set -- $c
  CMD="$CMD${CMD:+ && }$LEAD --op $1 --size $2 --message $2 --repeat $3"
done
ip netns exec "$NS" "$HERE/boot.sh" "$IMG" s0 10.77.0.100/24 52:54:00:79:00:00 43103 43003 "$CMD" >"$LOGS/boot-s0.txt" 2>&1 &
SENDER=$!
RXE_PIDS+=("$SENDER")
fail=0
# Each group: the three rocast receivers join the rxe leader, receive, and report.
first=1
for c in "${CASES[@]}"; do
  set -- $c
  # The previous group's leader process must be gone before members connect to the
  # next one (a connection into a closing listener is reset).
  [ $first = 1 ] || sleep 2
  first=0
  joins=()
  for i in 0 1 2; do
    "$ROCAST" lab exec --name "$LAB" "h$i" -- "$ROCAST" mcast join --bind "10.77.0.$((i + 1))" \
      --leader 10.77.0.100 --mtu 1024 --timeout 200 >"$LOGS/join-$1-$2-h$i.txt" 2>&1 &
    joins+=($!)
  done
  for i in 0 1 2; do
    if ! wait "${joins[$i]}"; then say "FAILED: h$i $1 $2: $(tail -2 "$LOGS/join-$1-$2-h$i.txt")"; fail=1; fi
  done
  ok=$(cat "$LOGS"/join-"$1"-"$2"-h*.txt | grep -c '^received .*: ok$' || true)
  say "group $1, $3 x $2 B: $ok of $((3 * $3)) receptions ok"
  [ "$ok" = $((3 * $3)) ] || fail=1
  [ $fail = 0 ] || break
done
wait "$SENDER" || { say "the rxe sender failed: $(tail -3 "$LOGS/boot-s0.txt")"; fail=1; }
grep -h -E '^registered' "$LOGS/s0.log" | sed 's/^/mixed-reverse-test: /' || true
grep -h "hw_counters" "$LOGS/s0.log" | sed 's/^.*hw_counters:/mixed-reverse-test: sender hw_counters:/' || true
kill "$SW" 2>/dev/null || true
wait "$SW" 2>/dev/null || true
rxe_check_captures "$ROCAST" "$LOGS/pcap" mixed-reverse-test || fail=1
say "$([ $fail = 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - T0 ))s; logs in $LOGS"
exit $fail
