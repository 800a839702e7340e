# Shared helpers for scripts/rxe-guest/*.sh (sourced, not run).

RXE_HOST_PACKAGES=(qemu-system-x86 busybox-static ibverbs-providers ibverbs-utils perftest rdma-core iproute2 cpio xz-utils kmod libibverbs-dev gcc make)

# apt-get install whatever of RXE_HOST_PACKAGES is missing (needs root).
rxe_ensure_host_packages() {
  local need=() p
  for p in "${RXE_HOST_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "rxe-guest: apt-get install ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

# The concrete kernel package behind linux-image-amd64 (e.g. linux-image-6.1.0-56-amd64).
rxe_kernel_package() {
  local k
  k=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-6\.1\.0-[0-9]+-amd64$/ {print $2; exit}')
  if [ -z "$k" ]; then
    k=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' | awk '{print $1}' | sort -V | tail -n1)
  fi
  echo "$k"
}

# One line per input of the image: package versions and the hash of the image-defining scripts.
rxe_image_versions() {
  local k here p
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  k=$(rxe_kernel_package)
  echo "$k $(apt-cache policy "$k" | awk '/Candidate:/ {print $2}')"
  for p in busybox-static libibverbs1 ibverbs-providers ibverbs-utils perftest iproute2 libc6; do
    echo "$p $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo none)"
  done
  echo "scripts $(cat "$here/build-image.sh" "$here/init" "$here/lib.sh" | sha256sum | cut -c1-16)"
  echo "verbs $(cat "$here/../../verbs/"*.c "$here/../../verbs/"*.h "$here/../../verbs/Makefile" | sha256sum | cut -c1-16)"
  # rocast-verbs-ud links the core (crates/ffi): its sources and the lock file are inputs.
  echo "core $(cd "$here/../.." && find crates/core/src crates/ffi/src -name '*.rs' | sort | xargs cat Cargo.lock crates/core/Cargo.toml crates/ffi/Cargo.toml | sha256sum | cut -c1-16)"
}

rxe_image_key() { rxe_image_versions | sha256sum | cut -c1-16; }

# Builds the guest image unless the cache holds it; prints its directory (progress on stderr).
rxe_ensure_image() {
  local here root key img t
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  rxe_ensure_host_packages >&2
  root=${ROCAST_RXE_IMAGE_ROOT:-/var/tmp/rocast-rxe-image}
  key=$(rxe_image_key)
  img="$root/$key"
  if [ ! -f "$img/vmlinuz" ] || [ ! -f "$img/initrd.gz" ]; then
    t=$(date +%s)
    mkdir -p "$root"
    rm -rf "$img.tmp"
    "$here/build-image.sh" "$img.tmp" >&2
    rm -rf "$img"; mv "$img.tmp" "$img"
    echo "rxe-guest: image $img built in $(( $(date +%s) - t ))s" >&2
  fi
  echo "$img"
}

# QEMU's dgram sockets get the default receive buffer (~200 KB); a 1 MB message arriving
# from the switch in one burst overflows it, which rxe sees as loss (measured: sequence
# errors and go-back-N retransmissions with no loss injected). rxe_raise_rmem sets 4 MB
# for the run; rxe_restore_rmem (called by the scripts' exit traps) puts it back.
RXE_RMEM_SAVED=
rxe_raise_rmem() {
  RXE_RMEM_SAVED=$(sysctl -n net.core.rmem_default)
  sysctl -qw net.core.rmem_default=4194304
}
rxe_restore_rmem() {
  if [ -n "$RXE_RMEM_SAVED" ]; then sysctl -qw net.core.rmem_default="$RXE_RMEM_SAVED"; fi
}

# rxe_rocast_bin REPO: prints the rocast binary the tests drive: $ROCAST_BIN if set, else
# REPO's release build, (re)built first so that it is never stale (progress on stderr).
rxe_rocast_bin() {
  local repo=$1 bin=${ROCAST_BIN:-$1/target/release/rocast}
  if [ -z "${ROCAST_BIN:-}" ] && { command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ]; }; then
    (cd "$repo" && PATH=$PATH:$HOME/.cargo/bin cargo build --release -q -p rocast-cli) >&2
  fi
  [ -x "$bin" ] || { echo "rxe-guest: no $bin (cargo build --release -p rocast-cli)" >&2; return 1; }
  echo "$bin"
}

# rxe_lab_start LAB HOSTS LOGS ROCAST: a fresh `rocast lab` LAB of HOSTS hosts (the
# switch and the guests run in its switch namespace), torn down on exit together with
# the processes in RXE_PIDS and the qemu processes whose pid files are in LOGS.
RXE_PIDS=()
rxe_lab_start() {
  RXE_LAB=$1 RXE_LOGS=$3 RXE_ROCAST=$4
  trap rxe_lab_cleanup EXIT
  rxe_raise_rmem
  "$RXE_ROCAST" lab down --name "$RXE_LAB" >/dev/null
  "$RXE_ROCAST" lab up --name "$RXE_LAB" --hosts "$2" >/dev/null
}
rxe_lab_cleanup() {
  rxe_guests_cleanup
  "$RXE_ROCAST" lab down --name "$RXE_LAB" >/dev/null 2>&1 || true
}

# rxe_guests_cleanup: kills the processes in RXE_PIDS and the qemu processes whose pid
# files are in RXE_LOGS, and restores the socket buffer limits (a script's EXIT trap,
# after rxe_raise_rmem).
rxe_guests_cleanup() {
  local p f
  for p in "${RXE_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for f in "$RXE_LOGS"/*.qemu.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  rxe_restore_rmem
}

# rxe_check_captures ROCAST DIR TAG [keep]: `rocast pcap check` on every link capture the switch
# wrote to DIR (`rocast switch --capture DIR`; the switch must have stopped, which closes
# them). One line per port; returns 1 if a file is missing, a frame fails, or a link
# carried no RoCE at all (a check of nothing proves nothing). Passing captures are
# deleted (unless "keep": a failed run's evidence): a 100 x 1 MB run writes about a gigabyte.
rxe_check_captures() {
  local rocast=$1 dir=$2 tag=$3 keep=${4:-} f out roce rc=0 n=0
  for f in "$dir"/port*.pcap; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    if out=$("$rocast" pcap check "$f" 2>&1); then
      roce=$(echo "$out" | tail -n1 | awk '{print $3}')
      echo "$tag: capture $(basename "$f"): $(echo "$out" | tail -n1)"
      [ "${roce:-0}" -gt 0 ] || { echo "$tag: capture $(basename "$f") carried no RoCE"; rc=1; }
    else
      echo "$tag: capture $(basename "$f") FAILED: $(echo "$out" | head -n5)"
      rc=1
    fi
  done
  [ "$n" -gt 0 ] || { echo "$tag: no captures in $dir"; return 1; }
  if [ "$rc" = 0 ] && [ -z "$keep" ]; then rm -f "$dir"/port*.pcap; fi
  return "$rc"
}
