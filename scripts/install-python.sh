#!/usr/bin/env bash
# Builds the Python package `rocast` (python/rocast/ + the Rust extension crates/py) as a
# wheel with maturin into target/wheels/, and installs it into the project's .venv, so that
# `.venv/bin/python -c "import rocast"` works. The README's set-up commands run this
# (through scripts/prepare.sh and .ci/run). The wheel is abi3: one file for CPython ≥ 3.10;
# `pip install target/wheels/rocast-*.whl` installs it into any other environment.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
[ -x .venv/bin/maturin ] || bash scripts/install-deps.sh
rm -f target/wheels/rocast-*.whl
(cd python && ../.venv/bin/maturin build --release --strip --locked --out ../target/wheels 2>&1 |
  grep -E "Built wheel|error|warning: unused" || true)
wheel=$(ls target/wheels/rocast-*.whl)
.venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"
repo=$PWD
# Imported from / so that the installed wheel answers, not the source tree.
echo "install-python: $wheel in .venv ($(cd / && "$repo/.venv/bin/python" -c 'import rocast; print("rocast", rocast.version(), "from", rocast.__file__)'))"
