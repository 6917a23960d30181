#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Makes the rxe guest's kernel an SMC-R v2 peer: loads smc and smc_diag, adds smc-core's UEID
# (the kernel offers SMC-Rv2 only with one) and a pnet table that maps lo, dummy0 and rxe0
# port 1 to one pnetid (connections to a local address route via lo), and mounts cgroup v2
# (smc-core's stacks put SMC's TCP option on their own sockets through it). With CGROUP, the
# option goes on the SYNs and SYN-ACKs of every socket of /sys/fs/cgroup/CGROUP (for plain
# TCP programs). Usage: setup.sh BUILD_DIR [CGROUP]
set -euo pipefail
tool=$1/tests/smc-kernel-setup
modprobe -a smc smc_diag
"$tool" ueid add SMC-CORE-LOOPBACK
for dev in lo dummy0; do
    "$tool" pnet add SMCCORE eth "$dev"
done
"$tool" pnet add SMCCORE ib rxe0 1
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
if [[ -n ${2:-} ]]; then
    mkdir -p "/sys/fs/cgroup/$2"
    "$tool" tcp-option "/sys/fs/cgroup/$2"
fi
