#!/usr/bin/env bash
# Multicast among unmodified Soft-RoCE hosts: one rxe guest
# sends (rocast-verbs-lead: controller + sender on libibverbs), three rxe guests receive
# (rocast-verbs-member), all on dgram ports of one `rocast switch` running the Cepheus engine.
#   phase A, no loss: SEND and WRITE, 100 buffers of 4 KB and 100 of 1 MB; every receiver's
#     CRC-32 must match; the sender's completions all succeed.
#   every frame on every guest link (captured in the switch) passes `rocast pcap check`;
#   phase B, 1% loss injected by the switch toward one receiver: SEND and WRITE of 5 x 1 MB;
#     go-back-N through the aggregated NAKs recovers, every byte arrives.
# Run as root. ROCAST_BIN: the rocast binary (default target/release/rocast, built if missing).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
. "$HERE/lib.sh"
T0=$(date +%s)
say() { echo "rxe-multicast-test: $*"; }
IMG=$(rxe_ensure_image)
ROCAST=$(rxe_rocast_bin "$REPO")
LOGS=${ROCAST_RXE_LOGS:-/var/tmp/rocast-rxe-logs/rxemc-$(date +%Y%m%d-%H%M%S)-$$}
mkdir -p "$LOGS"
export ROCAST_BOOT_TIMEOUT=${ROCAST_BOOT_TIMEOUT:-300}
PIDS=()
rxe_raise_rmem
cleanup() {
  local p f
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for f in "$LOGS"/*/*.qemu.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  rxe_restore_rmem
}
trap cleanup EXIT
fail=0

# phase NAME SWITCH_OPTS SENDER_CMD GROUPS: boots the sender (port 0) and three receivers;
# returns 1 if a guest failed or a capture did not check.
phase() {
  local name=$1 swopts=$2 lead=$3 groups=$4 i bad=0
  local dir="$LOGS/$name"
  mkdir -p "$dir"
  export ROCAST_LOG_DIR=$dir
  local args=()
  for i in 0 1 2 3; do
    args+=(--port "dgram:127.0.0.1:4200$i=127.0.0.1:4210$i" --host "10.77.0.10$i@$i=52:54:00:78:00:0$i")
  done
  # shellcheck disable=SC2086
  "$ROCAST" switch "${args[@]}" $swopts --control "$dir/switch.sock" --capture "$dir/pcap" >"$dir/switch.txt" 2>&1 &
  local sw=$!
  PIDS+=("$sw")
  sleep 0.3
  local boots=()
  for i in 1 2 3; do
    "$HERE/boot.sh" "$IMG" "r$i" "10.77.0.10$i/24" "52:54:00:78:00:0$i" "4210$i" "4200$i" \
      "for n in \$(seq $groups); do rocast-verbs-member --bind 10.77.0.10$i --leader 10.77.0.100 --dev rxe0 --gid 1 --mtu 1024 --timeout 200 || exit 1; done" \
      >"$dir/boot-r$i.txt" 2>&1 &
    boots+=($!)
  done
  "$HERE/boot.sh" "$IMG" s0 10.77.0.100/24 52:54:00:78:00:00 42100 42000 "$lead" >"$dir/boot-s0.txt" 2>&1 &
  boots+=($!)
  for i in "${!boots[@]}"; do wait "${boots[$i]}" || { say "$name: guest ${i} failed"; bad=1; }; done
  grep -h -E '^(registered|multicast)' "$dir/s0.log" | sed "s/^/rxe-multicast-test: $name: /" || true
  for g in s0 r1 r2 r3; do grep -h "hw_counters" "$dir/$g.log" | sed "s/^.*hw_counters:/rxe-multicast-test: $name: $g hw_counters:/" || true; done
  "$ROCAST" switch --stats --control "$dir/switch.sock" | grep -E '^(port|cepheus (data_in|replicas|naks_in|naks_out|acks_out))' \
    | sed -E 's/AfPacket|Dgram \{[^}]*\}//' | sed "s/^/rxe-multicast-test: $name:   /" || true
  kill "$sw" 2>/dev/null || true
  wait "$sw" 2>/dev/null || true
  rxe_check_captures "$ROCAST" "$dir/pcap" "rxe-multicast-test: $name" || { CAPTURES_BAD=1; bad=1; }
  return $bad
}

# guest_stall NAME: the phase's failure was Soft-RoCE under TCG stalling, and nothing else:
# the sender or a receiver only timed out (no completions, members never ready, nothing
# from the leader), every buffer that finished reached all three members
# intact (no member reported a bad buffer), the switch dropped or failed nothing it was
# not told to drop (only injected_drops), and every captured frame checked. Seen in CI:
# the sender guest stopped transmitting mid-buffer (its NIC's tx count equal to the
# switch's rx count, its ARP entries FAILED) with everything above clean.
guest_stall() {
  local dir="$LOGS/$1"
  [ -z "${CAPTURES_BAD:-}" ] || return 1
  grep -qhE "^received .*: FAILED" "$dir"/r[123].log 2>/dev/null && return 1
  grep -h "^multicast" "$dir/s0.log" 2>/dev/null | grep -qv "3 of 3 members ok" && return 1
  # (The group session's words for the same waits: "members never became ready",
  # "nothing from the leader".)
  grep -qhE "no completions|members not ready|members never became ready|timed out waiting for the leader|nothing from the leader" "$dir"/s0.log "$dir"/r[123].log 2>/dev/null || return 1
  ! grep -E '^port ' "$dir/switch.txt" | grep -qE ' (tx_errors|queue_drops|rx_errors|kernel_drops|capture_errors|oversize) [1-9]' || return 1
  ! grep -qE '^(switch|cepheus) drop_[a-z_]+ [1-9]' "$dir/switch.txt" || return 1
}

# run_phase ARGS…: phase, once more after a guest stall (its logs and captures kept in
# NAME.attempt1/); the second run decides. Any other failure fails at once.
run_phase() {
  local name=$1
  CAPTURES_BAD=
  phase "$@" && return 0
  if guest_stall "$name"; then
    mv "$LOGS/$name" "$LOGS/$name.attempt1"
    say "$name: GUEST STALL: a guest timed out with every finished buffer intact and the switch clean; evidence in $LOGS/$name.attempt1; running the phase once more"
    CAPTURES_BAD=
    phase "$@" && return 0
  fi
  fail=1
}

L="rocast-verbs-lead --bind 10.77.0.100 --members 3 --dev rxe0 --gid 1 --mtu 1024 --timeout 200"
run_phase A "" "$L --op send --size 4096 --repeat 100 && $L --op send --size 1048576 --message 1048576 --repeat 100 && $L --op write --size 4096 --repeat 100 && $L --op write --size 1048576 --message 1048576 --repeat 100" 4
# Without injected loss, the sender's rxe saw no sequence error and never exceeded its
# retries (that would also fail a completion). A timer retry under a loaded 2-core host
# (completer_retry_err) is reported but allowed.
if grep -h "hw_counters" "$LOGS/A/s0.log" | grep -E "seq_err|retry_exceeded"; then
  say "A: the sender saw sequence errors or exceeded its retries without injected loss"; fail=1
fi
# Every buffer of every group reached all three receivers intact.
n=$(grep -h "^multicast" "$LOGS/A/s0.log" | grep -c "3 of 3 members ok" || true)
[ "$n" = 400 ] || { say "A: $n of 400 buffers reached all three members intact"; fail=1; }
[ -n "${ROCAST_RXE_ONLY_A:-}" ] || run_phase B "--loss 0.01 --loss-port 3 --seed 7" "$L --op send --size 1048576 --repeat 5 && $L --op write --size 1048576 --repeat 5" 2
if [ -z "${ROCAST_RXE_ONLY_A:-}" ]; then
  n=$(grep -h "^multicast" "$LOGS/B/s0.log" | grep -c "3 of 3 members ok" || true)
  [ "$n" = 10 ] || { say "B: $n of 10 buffers reached all three members intact"; fail=1; }
  grep -q "injected_drops [1-9]" "$LOGS/B/switch.txt" 2>/dev/null || true
fi
say "$([ $fail = 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - T0 ))s; logs in $LOGS"
exit $fail
