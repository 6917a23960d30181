#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Makes the rxe guest's kernel an SMC-R v2 peer: loads smc and smc_diag, adds smc-core's UEID
# (the kernel offers SMC-Rv2 only with one) and a pnet table that maps lo, dummy0 and rxe0
# port 1 to one pnetid (connections to a local address route via lo). With CGROUP, the SMC
# TCP option goes on the SYNs and SYN-ACKs of /sys/fs/cgroup/CGROUP (cgroup v2, mounted if
# need be). Usage: setup.sh BUILD_DIR [CGROUP]
set -euo pipefail
tool=$1/tests/smc-kernel-setup
modprobe -a smc smc_diag
"$tool" ueid add SMC-CORE-LOOPBACK
for dev in lo dummy0; do
    "$tool" pnet add SMCCORE eth "$dev"
done
"$tool" pnet add SMCCORE ib rxe0 1
if [[ -n ${2:-} ]]; then
    mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
    mkdir -p "/sys/fs/cgroup/$2"
    "$tool" tcp-option "/sys/fs/cgroup/$2"
fi
