#!/usr/bin/env bash
# Boots one Soft-RoCE guest under qemu-system-x86_64 (TCG, no KVM) whose virtio NIC is a
# `-netdev dgram` UDP tunnel: raw Ethernet frames in UDP datagrams from 127.0.0.1:LOCAL_UDP to
# 127.0.0.1:REMOTE_UDP. The guest sets up rxe0 on eth0 and runs COMMAND (sh -c), then powers off.
#
# Usage: boot.sh OUTDIR NAME IP/PREFIX MAC LOCAL_UDP REMOTE_UDP "COMMAND"
#   OUTDIR holds vmlinuz and initrd.gz (build-image.sh). Console log: LOGDIR/NAME.log.
#   Exit code: COMMAND's (from the guest's "ROCAST-EXIT <code>"), 124 when the guest did not
#   finish within ROCAST_BOOT_TIMEOUT seconds, 125 when it stopped without printing ROCAST-EXIT.
# Environment: ROCAST_LOG_DIR (LOGDIR: NAME.log, NAME.qemu.pid, NAME.qemu.err; default OUTDIR),
#   ROCAST_MTU (guest eth0 MTU, default 1500), ROCAST_BOOT_TIMEOUT (default 300),
#   ROCAST_QEMU_MEM (MiB, default 512), ROCAST_QEMU_EXTRA (more qemu arguments, word-split).
set -euo pipefail
if [ $# -ne 7 ]; then
  sed -n '2,12p' "$0" >&2; exit 2
fi
OUTDIR=$1 NAME=$2 IP=$3 MAC=$4 LPORT=$5 RPORT=$6 CMD=$7
LOGDIR=${ROCAST_LOG_DIR:-$OUTDIR}
mkdir -p "$LOGDIR"
LOG="$LOGDIR/$NAME.log"
TIMEOUT=${ROCAST_BOOT_TIMEOUT:-300}
for f in vmlinuz initrd.gz; do
  [ -f "$OUTDIR/$f" ] || { echo "boot.sh: $OUTDIR/$f missing (run build-image.sh $OUTDIR)" >&2; exit 2; }
done
CMD64=$(printf '%s' "$CMD" | base64 -w0)
APPEND="console=ttyS0 quiet panic=-1 rocast.ip=$IP rocast.mtu=${ROCAST_MTU:-1500} rocast.cmd=$CMD64"
if [ ${#APPEND} -gt 2000 ]; then
  echo "boot.sh: command too long for the kernel command line (${#APPEND} > 2000)" >&2; exit 2
fi

PIDFILE="$LOGDIR/$NAME.qemu.pid"
rm -f "$LOG" "$PIDFILE"
QPID=
cleanup() { [ -n "$QPID" ] && kill "$QPID" 2>/dev/null || true; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

t0=$(date +%s%N)
# -display none -serial file: is -nographic without the stdio multiplexer, so the console goes to
# the log even when this script runs in the background.
qemu-system-x86_64 \
  -machine q35,accel=tcg -cpu max -m "${ROCAST_QEMU_MEM:-512}" -smp 1 \
  -display none -monitor none -serial "file:$LOG" -no-reboot -pidfile "$PIDFILE" \
  -kernel "$OUTDIR/vmlinuz" -initrd "$OUTDIR/initrd.gz" -append "$APPEND" \
  -netdev "dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=$LPORT,remote.type=inet,remote.host=127.0.0.1,remote.port=$RPORT" \
  -device "virtio-net-pci,netdev=n0,mac=$MAC,romfile=" \
  ${ROCAST_QEMU_EXTRA:-} </dev/null >"$LOGDIR/$NAME.qemu.err" 2>&1 &
QPID=$!
ready= timed_out=
while kill -0 "$QPID" 2>/dev/null; do
  now=$(date +%s%N)
  if [ -z "$ready" ] && grep -q ROCAST-CMD-START "$LOG" 2>/dev/null; then
    ready=$(( (now - t0) / 1000000 ))
  fi
  if [ $(( (now - t0) / 1000000000 )) -ge "$TIMEOUT" ]; then
    timed_out=1; kill "$QPID" 2>/dev/null; break
  fi
  sleep 0.2
done
set +e
wait "$QPID"
qrc=$?
set -e
QPID=
rm -f "$PIDFILE"
secs=$(awk -v ns=$(( $(date +%s%N) - t0 )) 'BEGIN {printf "%.1f", ns/1e9}')
[ -s "$LOGDIR/$NAME.qemu.err" ] && sed 's/^/boot.sh: qemu: /' "$LOGDIR/$NAME.qemu.err" >&2

rc=$(tr -d '\r' <"$LOG" | awk '/^ROCAST-EXIT / {print $2}' | tail -n1)
if [ -z "$rc" ]; then
  if [ -n "$timed_out" ]; then rc=124; echo "boot.sh: $NAME timed out after ${TIMEOUT}s" >&2
  else rc=125; echo "boot.sh: $NAME: qemu exited $qrc without ROCAST-EXIT" >&2; fi
fi
up=$(tr -d '\r' <"$LOG" | sed -n 's/.*rxe0 active_mtu .* up \([0-9.]*\)s$/\1/p' | tail -n1)
[ -n "$ready" ] && ready=$(awk -v ms="$ready" 'BEGIN {printf "%.1f", ms/1000}')
echo "boot.sh: $NAME exit $rc after ${secs}s wall; boot to rxe0 ready: ${ready:-?}s host (${up:-?}s guest uptime)"
exit "$rc"
