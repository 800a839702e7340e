#!/usr/bin/env bash
# The main job on its built-in default scenario (README, first command): the
# discrete-event simulator's default scenario (a 128-host k=8 fat-tree with PFC, ECN
# and DCQCN running a 1 MB permutation), with a capture of one host link checked by
# `rocast pcap check`. Outputs land in out/sim/.
set -euo pipefail
source "$(dirname "$0")/prepare.sh"
"$R" sim --out out/sim --set 'output.capture_links=[[0,128]]' --set output.capture_max_packets=2000
"$R" pcap check out/sim/capture.pcap
echo "fct.txt (first lines): sip dip sport dport size start_ns fct_ns standalone_fct_ns"
head -3 out/sim/fct.txt
