#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The kernel's SMC-R and smc-core's over one rxe device (interop milestones 1 to 3), in the
# role ROLE of the kernel: "client" (kernel-smc-nc connects to smc-nc -l) or "server"
# (smc-nc connects to kernel-smc-nc -l). Two connections one after another: the first
# streams MIB random MiB each way, the second, with nothing to send, must join the first's
# link group. The server closes first (the client ends its side only after the server's), so
# each end closes first in one of the two roles. rxe0 has two GIDs, so the group takes a
# second link by the v2 ADD_LINK (the kernel's end of it on its first GID: asymmetric).
# Passes when the bytes arrive intact, both smc-nc connections say SMC-Rv2, smc-nc saw two
# links, the kernel's SMC_DIAG shows its end as SMCR and ACTIVE and never as a fallback, its
# statistics count two SMC-Rv2 handshakes in its role, it made one SMC-R link group for both,
# and that group ends when smc-nc does. Usage: kernel_smcr_test.sh BUILD_DIR ROLE MIB. Only
# in the rxe guest on 6.12 (needs_kernel.sh); it skips (77) elsewhere.
set -euo pipefail
build=$(cd "$1" && pwd)
role=$2
mib=$3
source "$(dirname "$0")/needs_kernel.sh"
bash "$(dirname "$0")/setup.sh" "$build"
tool=$build/tests/smc-kernel-setup
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
head -c $((mib << 20)) /dev/urandom > "$dir/ours.in"
head -c $((mib << 20)) /dev/urandom > "$dir/kernel.in"
lgrs() { "$tool" lgr | awk '$1 == "lgr" { print $2 }' | sort -u; }
lgrs > "$dir/lgr.before"
# "smcr client v1 A v2 B server v1 C v2 D": the v2 count of the kernel's role.
v2done() {
    "$tool" stats | awk -v r="$role" '{ print (r == "client" ? $6 : $11) }'
}
before=$(v2done)

ip=192.0.2.1
port=$((7200 + RANDOM % 100))
# smc-nc puts SMC's TCP option on its SYN or SYN-ACKs itself (SmcStack, by BPF); the
# kernel's sockets add it on theirs.
ours() {
    "$build/smc/tools/smc-nc" -v --smcr rxe0 "$@" < "$dir/ours.in" > "$dir/ours.out" \
        2> "$dir/ours.err"
}
kernel() {
    timeout 300 "$build/tests/kernel-smc-nc" -c 2 "$@" < "$dir/kernel.in" > "$dir/kernel.out"
}
# The client closes second.
if [[ $role == client ]]; then
    ours --count 2 -l $ip $port &
    for _ in $(seq 50); do grep -q listening "$dir/ours.err" 2>/dev/null && break; sleep 0.1; done
    kernel --close-second $ip $port &
else
    kernel -l $ip $port 2> "$dir/kernel.err" &
    for _ in $(seq 50); do grep -q listening "$dir/kernel.err" && break; sleep 0.1; done
    ours --close-second --count 2 $ip $port &
fi
# The kernel's view of its sockets and link groups while they live.
while [[ -n $(jobs -pr) ]]; do
    "$tool" diag >> "$dir/diag" || true
    lgrs >> "$dir/lgr.seen"
    sleep 0.2
done
wait %1 && wait %2 || { echo "a peer failed"; cat "$dir/ours.err"; exit 1; }
cat "$dir/ours.err"

cmp -s "$dir/ours.in" "$dir/kernel.out" || { echo "kernel received other bytes"; exit 1; }
cmp -s "$dir/kernel.in" "$dir/ours.out" || { echo "smc-core received other bytes"; exit 1; }
! grep -q 'no SMC TCP option' "$dir/ours.err" || { echo "smc-nc had no TCP option"; exit 1; }
[[ $(grep -c '^smc-nc: SMC-Rv2 rxe0$' "$dir/ours.err") == 2 ]] ||
    { echo "smc-nc did not say SMC-Rv2 twice"; exit 1; }
grep -q ': links 2: ' "$dir/ours.err" || { echo "no second link (ADD_LINK v2)"; exit 1; }
# The kernel's end: its local port is ours' peer port, or the listening port.
if [[ $role == client ]]; then mine=" > $ip:$port"; else mine=" $ip:$port > "; fi
grep -F -- "$mine" "$dir/diag" | sort -u > "$dir/kernel.diag" || true
cat "$dir/kernel.diag"
[[ $(grep -c '^smc-diag: SMCR state 1 ' "$dir/kernel.diag") -ge 1 ]] ||
    { echo "SMC_DIAG never showed the kernel's end as SMCR ACTIVE"; exit 1; }
! grep -q FALLBACK "$dir/kernel.diag" || { echo "the kernel fell back"; exit 1; }
done=$(($(v2done) - before))
[[ $done == 2 ]] || { echo "the kernel counted $done SMC-Rv2 handshakes as $role, not 2"; exit 1; }
sort -u -o "$dir/lgr.seen" "$dir/lgr.seen"
made=$(comm -13 "$dir/lgr.before" "$dir/lgr.seen" | wc -l)
[[ $made == 1 ]] || { echo "the kernel made $made link groups for two connections"; exit 1; }
# smc-nc has ended, and its stack its groups (DELETE_LINK ALL): the kernel's goes too.
for _ in $(seq 50); do
    [[ -z $(comm -13 "$dir/lgr.before" <(lgrs)) ]] && break
    sleep 0.1
done
[[ -z $(comm -13 "$dir/lgr.before" <(lgrs)) ]] ||
    { echo "the kernel's link group outlived smc-nc by 5 s"; exit 1; }
echo "kernel-smcr ($role): $(uname -r), $mib MiB each way and a second connection in one" \
    "link group of two links, SMC-R by SMC_DIAG"
