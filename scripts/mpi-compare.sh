#!/usr/bin/env bash
# Open MPI's own MPI_Bcast (its default decision and each forced coll_tuned algorithm)
# against the same unmodified program with librocast_mpi preloaded, in one run on one
# lab: mpi/bcast_check at 4 and 8 ranks, 1 KiB to 64 MiB, the median of 5 calls after
# a warm-up, and the CPU time of all ranks per GB delivered. rocast runs with
# ROCAST_MPI_THRESHOLD=1 so that every size goes through the switch (the crossover
# is what sets the library's default threshold), first with the switch daemon
# replicating every copy (`rocast-daemon`), then, after the rest, on the same lab
# brought up again with `--fast-path` (the kernel replicates the group's new data:
# `rocast-fast-path`). Writes docs/runtime/mpi.md and docs/runtime/mpi.csv.
#   sudo bash scripts/mpi-compare.sh [RATE]      (RATE: the lab's links, default 1gbit)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1gbit}
sizes="1024 4096 16384 65536 262144 1048576 4194304 16777216 67108864"
bash scripts/build-mpi.sh >/dev/null
cargo build -q --release -p rocast-cli
B=$PWD/target/release/rocast
LAB=mpicmp
work=$(mktemp -d)
trap '$B lab down --name $LAB >/dev/null 2>&1 || true; rm -rf "$work" /tmp/rocast-ompi-h[1-8]' EXIT
$B lab down --name $LAB >/dev/null 2>&1 || true
$B lab up --name $LAB --hosts 8 --switch --rate "$rate" >/dev/null
for i in 1 2 3 4 5 6 7 8; do echo "10.77.0.$i slots=1"; done > "$work/hosts"
csv=docs/runtime/mpi.csv
mkdir -p docs/runtime
echo "ranks,variant,size_bytes,median_us,min_us,cpu_s_per_gb" > "$csv"
run() { # NP VARIANT MPIRUN-ARGS...
  local np=$1 name=$2; shift 2
  local out attempt
  for attempt in 1 2 3; do
    out=$(timeout 900 $B lab exec --name $LAB h0 -- env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ROCAST_LAB_NAME=$LAB \
      mpirun -np "$np" --hostfile "$work/hosts" --mca plm_rsh_agent "$PWD/scripts/lab-rsh-agent.sh" --mca btl tcp,self \
      --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --mca routed direct \
      --mca mpi_yield_when_idle 1 --mca rtc ^hwloc "$@" "$PWD/target/mpi/bcast_check" -i 5 -w 1 $sizes) && break
    # A launch that failed (a daemon that did not start) is tried again, and said so.
    echo "mpi-compare: $name $np ranks: mpirun failed (attempt $attempt of 3)" >&2
    [ "$attempt" = 3 ] && exit 1
  done
  echo "$out" | grep -v '^#' | while read -r size med min cpu rest; do
    [ -n "$rest" ] && { echo "mpi-compare: $name $np ranks: $rest" >&2; exit 1; }
    echo "$np,$name,$size,$med,$min,$cpu" >> "$csv"
  done
  echo "mpi-compare: $np ranks, $name done" >&2
}
algs="1:basic_linear 2:chain 3:pipeline 4:split_binary_tree 5:binary_tree 6:binomial 7:knomial 8:scatter_allgather 9:scatter_allgather_ring"
for np in 4 8; do
  run $np rocast-daemon -x LD_PRELOAD="$PWD/target/mpi/librocast_mpi.so" -x ROCAST_MPI_THRESHOLD=1 -x ROCAST_MPI_CAPACITY=67108864
  run $np open-mpi
  for a in $algs; do
    run $np "ompi-${a#*:}" --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_bcast_algorithm "${a%%:*}" \
      --mca coll_tuned_bcast_algorithm_segmentsize 131072
  done
done
$B lab down --name $LAB >/dev/null
$B lab up --name $LAB --hosts 8 --switch --fast-path --rate "$rate" >/dev/null
for np in 4 8; do
  run $np rocast-fast-path -x LD_PRELOAD="$PWD/target/mpi/librocast_mpi.so" -x ROCAST_MPI_THRESHOLD=1 -x ROCAST_MPI_CAPACITY=67108864
done
.venv/bin/python scripts/mpi-table.py "$csv" "$rate" "$(git rev-parse --short HEAD)" > docs/runtime/mpi.md
echo "wrote docs/runtime/mpi.md and $csv" >&2
