#!/usr/bin/env bash
# The main job on its built-in default scenario (README, first command): `rocast sim
# --preset multicast`, one multicast group on the default fabric (the 128-host k=8
# fat-tree at 100 Gb/s with PFC): Cepheus' in-network multicast against the
# application-layer overlays (binomial tree, chain, RDMC's pipeline, ring), 4 KB to
# 16 MB, with the table, a plot, and a capture of the sender's and a member's links
# during the Cepheus run, checked by `rocast pcap check` (every bridged copy's ICRC).
# Outputs land in out/multicast/. Then puts `rocast` on the PATH (scripts/install-bin.sh).
set -euo pipefail
source "$(dirname "$0")/prepare.sh"
"$R" sim --preset multicast --out out/multicast
"$R" pcap check out/multicast/capture.pcap
