#!/usr/bin/env bash
# Puts the release `rocast` on the PATH (the README's set-up commands run this after the
# build): a symbolic link in /usr/local/bin when writable (root), else in ~/.local/bin.
# The binary finds its Python helpers through the link's target (the checkout), so the
# checkout must stay where it is; set ROCAST_HOME if you move the binary itself.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$PWD/target/release/rocast"
[ -x "$bin" ] || { echo "install-bin: no $bin (cargo build --release -p rocast-cli)" >&2; exit 1; }
if [ -w /usr/local/bin ]; then
  dir=/usr/local/bin
else
  dir="$HOME/.local/bin"
  mkdir -p "$dir"
  case ":$PATH:" in *":$dir:"*) ;; *) echo "install-bin: add $dir to your PATH" >&2 ;; esac
fi
ln -sfn "$bin" "$dir/rocast"
echo "install-bin: $dir/rocast -> $bin ($("$dir/rocast" --version))"
