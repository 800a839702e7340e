#!/usr/bin/env bash
# Builds a tiny Soft-RoCE (rdma_rxe) guest image from Debian packages only:
#   OUTDIR/vmlinuz     the Debian bookworm linux-image-6.1.0-*-amd64 kernel (downloaded, not installed)
#   OUTDIR/initrd.gz   busybox-static + rxe/virtio modules + ibverbs/perftest/rdma binaries + /init
#   OUTDIR/versions    the package versions the image was built from (the cache key)
# Usage: build-image.sh OUTDIR        (run as root: apt-get install of missing host packages)
set -euo pipefail
OUTDIR=${1:?usage: build-image.sh OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)

. "$HERE/lib.sh"

# --- host packages -------------------------------------------------------------------------
rxe_ensure_host_packages

# --- kernel package: download (not install) and unpack --------------------------------------
KPKG=$(rxe_kernel_package)
[ -n "$KPKG" ] || { echo "build-image: cannot find a linux-image-6.1.0-*-amd64 package" >&2; exit 1; }
WORK=$(mktemp -d /var/tmp/rocast-rxe-build.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
echo "build-image: downloading $KPKG"
(cd "$WORK" && chmod 755 . && apt-get download -q "$KPKG" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
ls "$WORK"/"$KPKG"_*.deb >/dev/null
dpkg-deb -x "$WORK"/"$KPKG"_*.deb "$WORK/kernel"
KVER=$(ls "$WORK/kernel/lib/modules" | head -n1)
MODDIR="$WORK/kernel/lib/modules/$KVER"
echo "build-image: kernel $KVER"

# --- initramfs tree -------------------------------------------------------------------------
R="$WORK/root"
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,lib/modules,etc,proc,sys,dev,tmp,run,root}
cp /bin/busybox "$R/bin/busybox"
for a in $("$R/bin/busybox" --list); do
  [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"
done

# Modules, with their dependencies (modinfo -F depends), in load order (dependencies first).
ORDER=()
declare -A SEEN=()
modfile() { find "$MODDIR" -name "$1.ko" -o -name "$1.ko.xz" -o -name "$1.ko.zst" | head -n1; }
add_mod() {
  local m=$1 f d
  [ -n "${SEEN[$m]:-}" ] && return 0
  SEEN[$m]=1
  f=$(modfile "$m")
  [ -n "$f" ] || { echo "build-image: module $m not in $KPKG" >&2; exit 1; }
  for d in $(modinfo -F depends "$f" | tr ',' ' '); do add_mod "$d"; done
  ORDER+=("$m")
}
for m in failover net_failover virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_net \
         crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe; do
  add_mod "$m"
done
for m in "${ORDER[@]}"; do
  f=$(modfile "$m")
  case "$f" in
    *.ko.xz)  xz -dc "$f" >"$R/lib/modules/$m.ko" ;;       # busybox insmod cannot decompress
    *.ko.zst) zstd -qdc "$f" >"$R/lib/modules/$m.ko" ;;
    *)        cp "$f" "$R/lib/modules/$m.ko" ;;
  esac
done
printf '%s\n' "${ORDER[@]}" >"$R/lib/modules/order"
echo "build-image: modules: ${ORDER[*]}"

# Binaries and every shared library they (and the rxe provider, which is dlopen'ed) need.
BINS=()
for b in ibv_devices ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong ib_write_bw ib_send_bw ib_read_bw ib_write_lat ib_send_lat rdma; do
  p=$(command -v "$b") || { echo "build-image: $b not found on host" >&2; exit 1; }
  cp "$p" "$R/usr/bin/$b"
  BINS+=("$p")
done
# rocast-verbs-member/-lead (verbs/): the member and leader sides of rocast's multicast API
# on libibverbs; rocast-verbs-ud: UD multicast with the core's NACK protocol, linked with
# the core through its C ABI (crates/ffi, built here; stripped: the image is RAM).
REPO=$(cd "$HERE/../.." && pwd)
(cd "$REPO" && PATH=$PATH:$HOME/.cargo/bin cargo build --release -q -p rocast-ffi)
make -s -C "$REPO/verbs" OUT="$WORK/verbs" FFI_LIB="$REPO/target/release/librocast_ffi.a" >/dev/null
strip "$WORK/verbs/rocast-verbs-ud"
cp "$WORK/verbs/rocast-verbs-member" "$WORK/verbs/rocast-verbs-lead" "$WORK/verbs/rocast-verbs-ud" "$R/usr/bin/"
BINS+=("$WORK/verbs/rocast-verbs-member" "$WORK/verbs/rocast-verbs-lead" "$WORK/verbs/rocast-verbs-ud")
PROV=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so | head -n1)
mkdir -p "$R/usr/lib/x86_64-linux-gnu/libibverbs" "$R/etc/libibverbs.d"
cp "$PROV" "$R/usr/lib/x86_64-linux-gnu/libibverbs/"
cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
copy_lib() {  # copy a library preserving its path, plus the real file behind a symlink
  local l=$1
  mkdir -p "$R$(dirname "$l")"
  cp -L "$l" "$R$l"
}
for f in "${BINS[@]}" "$PROV"; do
  if ldd "$f" | grep -q 'not found'; then
    echo "build-image: missing libraries for $f:" >&2; ldd "$f" | grep 'not found' >&2; exit 1
  fi
  for l in $(ldd "$f" | awk '/=>/ {print $3} !/=>/ && $1 ~ /^\// {print $1}'); do
    [ -e "$R$l" ] || copy_lib "$l"
  done
done
# Debian's ld.so finds /lib/x86_64-linux-gnu; /usr/lib paths exist too (merged-/usr hosts report either).
echo "/lib/x86_64-linux-gnu
/usr/lib/x86_64-linux-gnu" >"$R/etc/ld.so.conf"
echo "root:x:0:0:root:/root:/bin/sh" >"$R/etc/passwd"
echo "root:x:0:" >"$R/etc/group"

# Check inside the tree, as the guest will see it, that every library resolves.
if command -v chroot >/dev/null && chroot "$R" /bin/sh -c 'true' 2>/dev/null; then
  for b in "${BINS[@]}" "$PROV"; do
    rel=/usr/bin/$(basename "$b"); [ "$b" = "$PROV" ] && rel=${PROV}
    out=$(chroot "$R" /lib64/ld-linux-x86-64.so.2 --list "$rel" 2>&1) || { echo "$out" >&2; exit 1; }
    if echo "$out" | grep -q 'not found'; then echo "build-image: in image, $rel: $out" >&2; exit 1; fi
  done
  echo "build-image: ldd inside the image tree: all libraries resolve"
fi

install -m 0755 "$HERE/init" "$R/init"

# --- output ---------------------------------------------------------------------------------
mkdir -p "$OUTDIR"
cp "$WORK/kernel/boot/vmlinuz-$KVER" "$OUTDIR/vmlinuz"
(cd "$R" && find . -print0 | sort -z | cpio --null -o -H newc --quiet | gzip -6) >"$OUTDIR/initrd.gz"
rxe_image_versions >"$OUTDIR/versions"
echo "build-image: $OUTDIR/vmlinuz ($(du -h "$OUTDIR/vmlinuz" | cut -f1)), $OUTDIR/initrd.gz ($(du -h "$OUTDIR/initrd.gz" | cut -f1))"
