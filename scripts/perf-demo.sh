#!/usr/bin/env bash
# rocast's real-time loopback transfer:
#  1. a perftest-style RC WRITE benchmark over UDP/4791 between 127.0.0.1 and 127.0.0.2,
#     clean and with 1% seeded loss;
#  2. a small SEND transfer captured with tcpdump on `lo`, checked with `rocast pcap check`
#     (every frame on the wire is real RoCEv2 with a valid ICRC).
set -euo pipefail
source "$(dirname "$0")/prepare.sh"

run_pair() { # args: client args...
  "$R" perf server --bind 127.0.0.1 --port 18515 &
  local srv=$!
  sleep 0.3
  "$R" perf client 127.0.0.1 --port 18515 "$@"
  wait "$srv"
}

echo "== RC RDMA WRITE, 1 MiB x 500, MTU 4096, no loss"
run_pair -s 1048576 -n 500 --mtu 4096 --op write
echo "== RC RDMA WRITE, 1 MiB x 500, MTU 4096, 1% loss at each receiver"
run_pair -s 1048576 -n 500 --mtu 4096 --op write --loss 0.01 --seed 7

echo "== captured SEND transfer (64 KiB x 20) -> out/demo.pcap"
tcpdump -i lo -w out/demo.pcap -U udp port 4791 2>/dev/null &
tcpd=$!
sleep 1
run_pair -s 65536 -n 20 --mtu 1024 --op send
sleep 0.5
kill "$tcpd"; wait "$tcpd" 2>/dev/null || true
"$R" pcap check out/demo.pcap
