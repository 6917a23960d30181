#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Boot Debian's kernel in a qemu guest over the host's root, create the soft-RoCE
# device rxe0 there, run a command in the build directory, and return its output and
# exit status. Usage:
#   tests/rxe/run-in-guest.sh [--accel tcg|kvm] [--timeout SECONDS] [--memory MB]
#       [--kernel VERSION] [--pair N:PORT] BUILD_DIR -- COMMAND...
# --kernel: the newest /boot/vmlinuz-VERSION* (default 6.1.: Debian 12's own kernel, whatever
# else is installed).
# --pair N:PORT makes this guest host N (1 or 2) of a pair: instead of rxe0 on a dummy, two
# NICs, each a qemu UDP socket to the same NIC of the other guest (host UDP ports PORT and
# up), eth0 10.1.0.N/24 under rxe0 and eth1 10.2.0.N/24 under rxe1. Its files go to
# BUILD_DIR/rxe-guest-N.
set -euo pipefail

accel=tcg timeout=240 memory=1024 pair= kernel_version=6.1.
while [[ $# -gt 0 && $1 == --* ]]; do
    case $1 in
    --accel) accel=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --memory) memory=$2; shift 2 ;;
    --pair) pair=$2; shift 2 ;;
    --kernel) kernel_version=$2; shift 2 ;;
    *) echo "run-in-guest: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ $# -ge 3 && $2 == -- ]] || { sed -n '3,7p' "$0" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift 2
here=$(cd "$(dirname "$0")" && pwd)
[[ $build != *[[:space:]]* ]] || { echo "run-in-guest: no spaces in the build path" >&2; exit 2; }

kernel=$(ls -1 /boot/vmlinuz-"$kernel_version"* 2>/dev/null | sort -V | tail -n 1)
[[ -n $kernel ]] || { echo "run-in-guest: no /boot/vmlinuz-$kernel_version* (apt-get install linux-image-amd64)" >&2; exit 2; }
version=${kernel#/boot/vmlinuz-}
for tool in qemu-system-x86_64 busybox cpio; do
    command -v "$tool" >/dev/null || { echo "run-in-guest: $tool is missing (see .ci/install-deps --rxe)" >&2; exit 2; }
done

work=$build/rxe-guest nic_args=(-nic none) me=
if [[ -n $pair ]]; then
    me=${pair%%:*} base=${pair#*:}
    [[ $me == [12] && $base =~ ^[0-9]+$ ]] || { echo "run-in-guest: --pair 1:PORT or 2:PORT" >&2; exit 2; }
    peer=$((3 - me))
    work=$build/rxe-guest-$me nic_args=()
    for nic in 0 1; do
        nic_args+=(-netdev "socket,id=n$nic,udp=127.0.0.1:$((base + 10 * peer + nic)),localaddr=127.0.0.1:$((base + 10 * me + nic))"
            -device "virtio-net-pci,netdev=n$nic,mac=52:54:00:12:0$me:0$nic")
    done
fi
cache=$build/rxe-guest # the kernel and initramfs, shared by a pair
mkdir -p "$work" "$cache"
exec 9> "$cache/lock"
flock 9 # a pair's second guest waits while the first makes them

# The uncompressed kernel boots about twice as fast as the bzImage.
if [[ ! -s $cache/vmlinux-$version ]]; then
    python3 - "$kernel" "$cache/vmlinux-$version" <<'PY' || cp "$kernel" "$cache/vmlinux-$version"
import lzma, sys
data = open(sys.argv[1], 'rb').read()
start = data.find(b'\xfd7zXZ\x00')
if start < 0:
    sys.exit(1)
open(sys.argv[2], 'wb').write(lzma.LZMADecompressor().decompress(data[start:]))
PY
fi

# A tiny initramfs: busybox, the virtio and 9p modules, our init.
if [[ ! -s $cache/initramfs-$version.cpio.gz || $here/guest-init.sh -nt $cache/initramfs-$version.cpio.gz ]]; then
    root=$cache/initramfs
    rm -rf "$root"
    mkdir -p "$root"/{bin,dev,proc,sys,newroot,modules}
    cp "$(command -v busybox)" "$root/bin/busybox"
    : > "$root/modules.order"
    for mod in virtio_pci 9pnet_virtio 9p; do
        modprobe -S "$version" --show-depends "$mod" | awk '$1 == "insmod" { print $2 }'
    done | awk '!seen[$0]++' | while read -r ko; do
        # busybox insmod takes plain .ko only (6.12 ships .ko.xz).
        name=$(basename "${ko%.xz}")
        case $ko in
        *.xz) xz -dc "$ko" > "$root/modules/$name" ;;
        *) cp "$ko" "$root/modules/$name" ;;
        esac
        echo "/modules/$name" >> "$root/modules.order"
    done
    cp "$here/guest-init.sh" "$root/init"
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$cache/initramfs-$version.cpio.gz"
fi

flock -u 9

# What runs in the guest, as root in a chroot of the host's /: set up rxe0 (and rxe1),
# then the command, in the build directory.
{
    echo 'set -u'
    echo 'ip link set lo up'
    if [[ -n $pair ]]; then
        echo 'modprobe -a rdma_rxe ib_uverbs virtio_net'
        # Named by MAC: without udev the probe order is the only other clue.
        for nic in 0 1; do
            echo "for _ in \$(seq 50); do grep -qs 52:54:00:12:0$me:0$nic /sys/class/net/*/address && break; sleep 0.1; done"
            echo "dev=\$(grep -l 52:54:00:12:0$me:0$nic /sys/class/net/*/address | cut -d/ -f5)"
            echo "[ \"\$dev\" = eth$nic ] || ip link set \"\$dev\" name eth$nic.tmp"
        done
        for nic in 0 1; do
            echo "[ -e /sys/class/net/eth$nic.tmp ] && ip link set eth$nic.tmp name eth$nic"
            echo "ip addr add 10.$((nic + 1)).0.$me/24 dev eth$nic && ip link set eth$nic up"
            echo "rdma link add rxe$nic type rxe netdev eth$nic || exit 90"
        done
        echo "export SMC_PAIR_HOST=$me"
    else
        echo 'modprobe -a rdma_rxe ib_uverbs dummy'
        echo 'ip link add dummy0 type dummy && ip link set dummy0 up'
        # Guest-internal addresses: dummy0 reaches nothing outside this guest.
        # Two of them give rxe0 two RoCE v2 GIDs: two paths, so link groups see an
        # alternate device and build symmetric links, as with two RNICs.
        echo 'ip addr add 192.0.2.1/24 dev dummy0 && ip addr add 192.0.2.2/24 dev dummy0'
        echo 'rdma link add rxe0 type rxe netdev dummy0 || exit 90'
    fi
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
    -kernel "$cache/vmlinux-$version" -initrd "$cache/initramfs-$version.cpio.gz" \
    -append "console=ttyS0 quiet loglevel=4 panic=-1 job=$build work=${work##*/}" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$build,mount_tag=job,security_model=none,multidevs=remap" \
    "${nic_args[@]}"
qemu=$?
set -e

[[ -f $work/output.log ]] && cat "$work/output.log"
if [[ ! -f $work/status ]]; then
    echo "run-in-guest: the guest did not finish (qemu exit $qemu); console:" >&2
    tail -n 30 "$work/console.log" >&2 || true
    exit 1
fi
status=$(cat "$work/status")
[[ $status == 90 ]] && echo "run-in-guest: could not create the rxe devices in the guest" >&2
exit "$status"
