#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Makes the rxe guest's kernel an SMC-R v2 peer: loads smc and smc_diag, adds smc-core's UEID
# (the kernel offers SMC-Rv2 only with one), a second rxe device (rxe1 on dummy1) and a pnet
# table that maps lo, dummy0, dummy1 and both devices to one pnetid (connections to a local
# address route via lo), mounts cgroup v2 (smc-core's stacks put SMC's TCP option on their
# own sockets through it) and traces the LLC messages the kernel receives. With CGROUP, the
# option goes on the SYNs and SYN-ACKs of every socket of /sys/fs/cgroup/CGROUP (for plain
# TCP programs). Usage: setup.sh BUILD_DIR [CGROUP]
set -euo pipefail
tool=$1/tests/smc-kernel-setup
modprobe -a smc smc_diag
"$tool" ueid add SMC-CORE-LOOPBACK
# A second device on a second dummy in the same subnet: Linux's alternate device, so both
# ends put a group's second link there (on one device rxe loops back only to its own MAC)
# and can lose it alone, with dummy1's carrier.
if [[ ! -e /sys/class/infiniband/rxe1 ]]; then
    ip link add dummy1 type dummy
    ip addr add 192.0.2.3/24 dev dummy1
    ip link set dummy1 up
    rdma link add rxe1 type rxe netdev dummy1
fi
for dev in lo dummy0 dummy1; do
    "$tool" pnet add SMCCORE eth "$dev"
done
for dev in rxe0 rxe1; do
    "$tool" pnet add SMCCORE ib "$dev" 1
done
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
# Every LLC message the kernel receives, by a kprobe on its LLC receive handler (the message
# is its second argument, %si on x86-64): its type byte (version in the high nibble), flags and link id, in
# the trace instance "smc-interop".
trace=/sys/kernel/tracing
mountpoint -q $trace || mount -t tracefs nodev $trace
grep -q smcinterop/llcrx $trace/kprobe_events ||
    echo 'p:smcinterop/llcrx smc_llc_rx_handler type=+0(%si):x8 flags=+3(%si):x8 link=+4(%si):u8' \
        >> $trace/kprobe_events
mkdir -p $trace/instances/smc-interop
echo 1 > $trace/instances/smc-interop/events/smcinterop/llcrx/enable
if [[ -n ${2:-} ]]; then
    mkdir -p "/sys/fs/cgroup/$2"
    "$tool" tcp-option "/sys/fs/cgroup/$2"
fi
