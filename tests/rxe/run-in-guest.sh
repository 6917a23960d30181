#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Boot Debian's kernel in a qemu guest over the host's root, create the soft-RoCE
# device rxe0 there, run a command in the build directory, and return its output and
# exit status. Usage:
#   tests/rxe/run-in-guest.sh [--accel tcg|kvm] [--timeout SECONDS] [--memory MB] BUILD_DIR -- COMMAND...
set -euo pipefail

accel=tcg timeout=240 memory=1024
while [[ $# -gt 0 && $1 == --* ]]; do
    case $1 in
    --accel) accel=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --memory) memory=$2; shift 2 ;;
    *) echo "run-in-guest: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ $# -ge 3 && $2 == -- ]] || { sed -n '3,7p' "$0" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift 2
here=$(cd "$(dirname "$0")" && pwd)
[[ $build != *[[:space:]]* ]] || { echo "run-in-guest: no spaces in the build path" >&2; exit 2; }

kernel=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)
[[ -n $kernel ]] || { echo "run-in-guest: no /boot/vmlinuz-* (apt-get install linux-image-amd64)" >&2; exit 2; }
version=${kernel#/boot/vmlinuz-}
for tool in qemu-system-x86_64 busybox cpio; do
    command -v "$tool" >/dev/null || { echo "run-in-guest: $tool is missing (see .ci/install-deps --rxe)" >&2; exit 2; }
done

work=$build/rxe-guest
mkdir -p "$work"

# The uncompressed kernel boots about twice as fast as the bzImage.
if [[ ! -s $work/vmlinux-$version ]]; then
    python3 - "$kernel" "$work/vmlinux-$version" <<'PY' || cp "$kernel" "$work/vmlinux-$version"
import lzma, sys
data = open(sys.argv[1], 'rb').read()
start = data.find(b'\xfd7zXZ\x00')
if start < 0:
    sys.exit(1)
open(sys.argv[2], 'wb').write(lzma.LZMADecompressor().decompress(data[start:]))
PY
fi

# A tiny initramfs: busybox, the virtio and 9p modules, our init.
if [[ ! -s $work/initramfs-$version.cpio.gz || $here/guest-init.sh -nt $work/initramfs-$version.cpio.gz ]]; then
    root=$work/initramfs
    rm -rf "$root"
    mkdir -p "$root"/{bin,dev,proc,sys,newroot,modules}
    cp "$(command -v busybox)" "$root/bin/busybox"
    : > "$root/modules.order"
    for mod in virtio_pci 9pnet_virtio 9p; do
        modprobe -S "$version" --show-depends "$mod" | awk '$1 == "insmod" { print $2 }'
    done | awk '!seen[$0]++' | while read -r ko; do
        cp "$ko" "$root/modules/"
        echo "/modules/$(basename "$ko")" >> "$root/modules.order"
    done
    cp "$here/guest-init.sh" "$root/init"
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initramfs-$version.cpio.gz"
fi

# What runs in the guest, as root in a chroot of the host's /: set up rxe0,
# then the command, in the build directory.
{
    echo 'set -u'
    echo 'modprobe rdma_rxe ib_uverbs dummy'
    echo 'ip link add dummy0 type dummy && ip link set dummy0 up'
    # Guest-internal addresses: dummy0 reaches nothing outside this guest.
    # Two of them give rxe0 two RoCE v2 GIDs: two paths, so link groups see an
    # alternate device and build symmetric links, as with two RNICs.
    echo 'ip link set lo up'
    echo 'ip addr add 192.0.2.1/24 dev dummy0 && ip addr add 192.0.2.2/24 dev dummy0'
    echo 'rdma link add rxe0 type rxe netdev dummy0 || exit 90'
    echo 'export SMC_RXE_GUEST=1'
    printf 'cd %q\n' "$build"
    printf '%q ' "$@"
    echo
} > "$work/command.sh"
rm -f "$work/status" "$work/output.log"

accel_args=(-accel tcg,thread=multi,tb-size=128 -cpu max)
[[ $accel == kvm ]] && accel_args=(-enable-kvm -cpu host)

set +e
timeout --kill-after=10 "$timeout" qemu-system-x86_64 "${accel_args[@]}" -smp 2 -m "$memory" \
    -nodefaults -no-user-config -nographic -no-reboot -monitor none \
    -serial "file:$work/console.log" \
    -kernel "$work/vmlinux-$version" -initrd "$work/initramfs-$version.cpio.gz" \
    -append "console=ttyS0 quiet loglevel=4 panic=-1 job=$build" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$build,mount_tag=job,security_model=none,multidevs=remap" \
    -nic none
qemu=$?
set -e

[[ -f $work/output.log ]] && cat "$work/output.log"
if [[ ! -f $work/status ]]; then
    echo "run-in-guest: the guest did not finish (qemu exit $qemu); console:" >&2
    tail -n 30 "$work/console.log" >&2 || true
    exit 1
fi
status=$(cat "$work/status")
[[ $status == 90 ]] && echo "run-in-guest: could not create rxe0 in the guest" >&2
exit "$status"
