# Sourced by the demo scripts: installs what is missing, builds rocast in release mode,
# sets R to the binary, and makes out/.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:$PATH"
bash scripts/install-deps.sh
cargo build --release --locked -q
R=target/release/rocast
mkdir -p out
bash scripts/install-bin.sh
bash scripts/install-python.sh
