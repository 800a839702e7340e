#!/usr/bin/env bash
# Installs everything rocast's build, demo and tests need on a fresh Debian machine.
# Idempotent: skips what is already there. Needs root for apt-get (CI and dev machines run as root).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v tcpdump >/dev/null 2>&1 || need_apt+=(tcpdump)        # captures for `rocast pcap check` on real traffic
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)          # rocast lab: namespaces, veths, tc
command -v ethtool >/dev/null 2>&1 || need_apt+=(ethtool)        # rocast lab --switch: veth offloads off for AF_PACKET switching
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)   # crates/ffi/tests/c_abi.rs compiles verbs/*_check.c
command -v c++ >/dev/null 2>&1 || need_apt+=(g++)            # scripts/fuzz.sh: libfuzzer-sys builds libFuzzer (C++)
command -v timeout >/dev/null 2>&1 || need_apt+=(coreutils)  # scripts/fuzz.sh: a deadline on every target
command -v tshark >/dev/null 2>&1 || need_apt+=(tshark)
command -v mpicc >/dev/null 2>&1 || need_apt+=(openmpi-bin libopenmpi-dev)  # librocast_mpi (scripts/build-mpi.sh) and tests/python/test_mpi_lab.py      # tests/python/test_wireshark.py: contrib/wireshark/rocast.lua under tshark
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  need_apt+=(cargo rustc)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# Python in a project-local venv: pytest and scapy (the independent RoCE oracle) for the
# tests; matplotlib and pandas for plots, highspy (HiGHS MIP solver) for exact Steiner
# trees in `rocast tree --algo exact` (python/steiner_exact.py); maturin builds the `rocast`
# Python package (scripts/install-python.sh); dask[distributed] runs rocast.sweep's
# backend="dask"; nbclient, nbformat and ipykernel execute examples/*.ipynb in CI; mpi4py
# and numpy run python/mpi_bcast.py (tests/python/test_mpi_lab.py, rocast bench lab-bcast --mpi).
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import scapy, pytest, matplotlib, pandas, highspy, dask.distributed, nbclient, nbformat, ipykernel, mpi4py, numpy' >/dev/null 2>&1 || [ ! -x .venv/bin/maturin ]; then
  echo "install-deps: python venv (.venv) with tests/python/requirements.txt and python/requirements.txt"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r tests/python/requirements.txt -r python/requirements.txt
fi
