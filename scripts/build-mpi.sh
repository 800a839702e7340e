#!/usr/bin/env bash
# Builds librocast_mpi.so (mpi/rocast_mpi.c over crates/mpi) into target/mpi/, with the
# MPI of `mpicc` (Open MPI 4.1 from Debian: apt-get install openmpi-bin libopenmpi-dev),
# and the OSU-style C test program beside it. Prints the library's path.
#   bash scripts/build-mpi.sh [--debug]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
[[ "${1:-}" == "--debug" ]] && profile=debug
command -v mpicc >/dev/null || { echo "build-mpi: needs mpicc (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 2; }
if [[ $profile == release ]]; then cargo build -q --release -p rocast-mpi; else cargo build -q -p rocast-mpi; fi
mkdir -p target/mpi
# The Rust staticlib is position-independent: it goes whole into the shared library.
mpicc -shared -fPIC -O2 -Wall -Wextra -o target/mpi/librocast_mpi.so mpi/rocast_mpi.c \
  "target/$profile/librocast_mpi_core.a" -lpthread -ldl -lm
mpicc -O2 -Wall -Wextra -o target/mpi/bcast_check mpi/bcast_check.c
echo target/mpi/librocast_mpi.so
