#!/bin/bash
# Build what run-in-rxe-vm.sh boots:
#   OUTDIR/initramfs-KVER.cpio.gz  busybox-static + kernel modules + /init (guest-init.sh)
#   OUTDIR/vmlinux-KVER            uncompressed ELF kernel extracted from /boot/vmlinuz-KVER;
#                                  qemu boots it through the PVH entry point, which skips
#                                  firmware real-mode setup + in-guest xz decompression
#                                  (several seconds under TCG)
# usage: build-initramfs.sh [OUTDIR (default /tmp/corewire-rxe-vm)] [KVER (default: newest with rdma_rxe)]
# needs: linux-image-amd64 (Debian 6.1), busybox-static, kmod, cpio, gzip, xz-utils, zstd, file
set -euo pipefail
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
OUTDIR=${1:-/tmp/corewire-rxe-vm}
KVER=${2:-}
if [ -z "$KVER" ]; then
  KVER=$(for d in /lib/modules/*/; do d=${d%/}; d=${d##*/};
           [ -n "$(find /lib/modules/$d -name 'rdma_rxe.ko*' -print -quit)" ] && echo "$d"; done | sort -V | tail -1)
fi
[ -n "$KVER" ] || { echo "no kernel with rdma_rxe.ko under /lib/modules (apt-get install linux-image-amd64)" >&2; exit 1; }
file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' \
  || { echo "/bin/busybox missing or not static (apt-get install busybox-static)" >&2; exit 1; }
mkdir -p "$OUTDIR"

# Modules, loaded in this order (dependencies resolved by modprobe --show-depends):
#  virtio_pci 9pnet_virtio 9p : host root + control dir over virtio-9p
#  overlay                    : writable (tmpfs) layer over the read-only host root
#  virtio_console             : /dev/hvc0 + /dev/hvc1 = command stdout / stderr
#  dummy veth                 : netdevs for rxe
#  crc32_generic crc32_pclmul : rxe's ICRC uses crypto "crc32"; normally request_module()d, and
#                               without it 'rdma link add' fails with ENOENT ("failed to add")
#  rdma_rxe                   : soft-RoCE (+ ib_core, ib_uverbs, udp_tunnel, ip6_udp_tunnel)
#  rdma_ucm                   : rdma_cm userspace (librdmacm, rping, perftest -R)
MODS="virtio_pci virtio_net 9pnet_virtio 9p overlay virtio_console dummy veth crc32_generic crc32_pclmul rdma_rxe rdma_ucm"

STAGE=$(mktemp -d /tmp/rxe-initramfs.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"/{bin,dev,proc,sys,newroot,lower,upper,mods}
cp /bin/busybox "$STAGE/bin/busybox"
: > "$STAGE/mods/order"
for m in $MODS; do
  modprobe -S "$KVER" --show-depends "$m" | while read -r kw path args; do
    [ "$kw" = insmod ] || continue
    base=$(basename "$path"); base=${base%.xz}; base=${base%.zst}; base=${base%.gz}
    grep -qx "$base" "$STAGE/mods/order" && continue
    case "$path" in
      *.ko)     cp "$path" "$STAGE/mods/$base" ;;
      *.ko.xz)  xz -dc "$path" > "$STAGE/mods/$base" ;;
      *.ko.zst) zstd -qdc "$path" > "$STAGE/mods/$base" ;;
      *.ko.gz)  gzip -dc "$path" > "$STAGE/mods/$base" ;;
    esac
    echo "$base" >> "$STAGE/mods/order"
  done
done
cp "$HERE/guest-init.sh" "$STAGE/init"
chmod +x "$STAGE/init"
echo "$KVER" > "$STAGE/kver"
(cd "$STAGE" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUTDIR/initramfs-$KVER.cpio.gz.tmp"
mv "$OUTDIR/initramfs-$KVER.cpio.gz.tmp" "$OUTDIR/initramfs-$KVER.cpio.gz"
echo "$OUTDIR/initramfs-$KVER.cpio.gz: $(wc -l < "$STAGE/mods/order") modules, $(du -h "$OUTDIR/initramfs-$KVER.cpio.gz" | cut -f1)" >&2

# uncompressed kernel for PVH boot (optional; run-in-rxe-vm.sh falls back to /boot/vmlinuz).
# Like the kernel's scripts/extract-vmlinux: try each compressed-stream magic in the bzImage
# until one decompresses to an ELF file. The decompressors complain about the trailing bytes
# after the stream; that is expected, hence 2>/dev/null and the ELF check instead of $?.
extract_vmlinux() { # IMAGE OUT
  local img=$1 out=$2 magic cmd off
  for pair in '\xfd7zXZ\x00:xz -dc' '\x1f\x8b\x08:gzip -dc' '\x28\xb5\x2f\xfd:zstd -qdc'; do
    magic=${pair%%:*}; cmd=${pair#*:}
    for off in $(LC_ALL=C grep -obUaP "$magic" "$img" | cut -d: -f1); do
      tail -c +$((off + 1)) "$img" | $cmd > "$out" 2>/dev/null || true
      [ "$(head -c 4 "$out" | od -An -c | tr -d ' ')" = '177ELF' ] && return 0
    done
  done
  rm -f "$out"; return 1
}
if [ ! -s "$OUTDIR/vmlinux-$KVER" ]; then
  if extract_vmlinux "/boot/vmlinuz-$KVER" "$OUTDIR/vmlinux-$KVER.tmp"; then
    mv "$OUTDIR/vmlinux-$KVER.tmp" "$OUTDIR/vmlinux-$KVER"
    echo "$OUTDIR/vmlinux-$KVER: extracted ($(du -h "$OUTDIR/vmlinux-$KVER" | cut -f1))" >&2
  else
    echo "could not extract vmlinux from /boot/vmlinuz-$KVER: booting the bzImage (slower)" >&2
  fi
fi
exit 0
