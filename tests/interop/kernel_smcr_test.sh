#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The kernel's SMC-R and smc-core's over rxe (interop milestones 1 to 4), in the role ROLE of
# the kernel: "client" (kernel-smc-nc connects to smc-nc -l) or "server" (smc-nc connects to
# kernel-smc-nc -l). Two connections one after another: the first streams MIB random MiB each
# way, the second, with nothing to send, must join the first's link group. The group's second
# link goes on rxe1 at both ends (setup.sh); halfway through the stream dummy1 goes down: both
# ends lose that link (DELETE_LINK), the stream moves to what is left (failover; the kernel as
# server adds an asymmetric link on rxe0), a quarter more flows, dummy1 comes up, the link
# comes back (ADD_LINK), the rest flows. The server closes first (the client ends its side
# only after the server's), so each end closes first in one of the two roles.
# Passes when the bytes arrive intact, both smc-nc connections say SMC-Rv2, both ends saw the
# link go and come back, the kernel's SMC_DIAG shows its end as SMCR and ACTIVE and never as a
# fallback, its statistics count two SMC-Rv2 handshakes in its role, it made one SMC-R link
# group for both connections, it got a DELETE_LINK of one link from us and, once smc-nc
# ended, a DELETE_LINK ALL (its LLC receive trace), and its group is gone then.
# Usage: kernel_smcr_test.sh BUILD_DIR ROLE MIB. Only in the rxe guest on 6.12
# (needs_kernel.sh); it skips (77) elsewhere.
set -euo pipefail
build=$(cd "$1" && pwd)
role=$2
mib=$3
source "$(dirname "$0")/needs_kernel.sh"
source "$(dirname "$0")/listening.sh" # tests/lib/, copied beside this script
bash "$(dirname "$0")/setup.sh" "$build"
tool=$build/tests/smc-kernel-setup
dir=$(mktemp -d)
# dummy1 is up again whatever happens: the next test needs rxe1.
trap 'ip link set dummy1 up; kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
head -c $((mib << 20)) /dev/urandom > "$dir/ours.in"
head -c $((mib << 20)) /dev/urandom > "$dir/kernel.in"
lgrs() { "$tool" lgr | awk '$1 == "lgr" { print $2 }' | sort -u; }
lgrs > "$dir/lgr.before"
# "smcr client v1 A v2 B server v1 C v2 D": the v2 count of the kernel's role.
v2done() {
    "$tool" stats | awk -v r="$role" '{ print (r == "client" ? $6 : $11) }'
}
before=$(v2done)

llc=/sys/kernel/tracing/instances/smc-interop/trace
echo > "$llc"
ip=192.0.2.1
port=$((7200 + RANDOM % 100))
quarter=$((mib << 18))
# Streams file $1 as the test goes: half at once, a quarter after gate1, the rest after gate2.
feed() {
    dd if="$1" bs=64K count=$((2 * quarter)) iflag=count_bytes status=none
    until [[ -e $dir/gate1 || ! -d $dir ]]; do sleep 0.1; done
    dd if="$1" bs=64K skip=$((2 * quarter)) count=$quarter iflag=skip_bytes,count_bytes \
        status=none
    until [[ -e $dir/gate2 || ! -d $dir ]]; do sleep 0.1; done
    dd if="$1" bs=64K skip=$((3 * quarter)) iflag=skip_bytes status=none
}
# smc-nc puts SMC's TCP option on its SYN or SYN-ACKs itself (SmcStack, by BPF); the
# kernel's sockets add it on theirs.
ours() {
    feed "$dir/ours.in" | "$build/smc/tools/smc-nc" -v --smcr rxe0,rxe1 "$@" \
        > "$dir/ours.out" 2> "$dir/ours.err"
}
kernel() {
    feed "$dir/kernel.in" | timeout 300 "$build/tests/kernel-smc-nc" -c 2 "$@" \
        > "$dir/kernel.out" 2> "$dir/kernel.err"
}
# The client closes second.
if [[ $role == client ]]; then
    ours --count 2 -l $ip $port &
    ours_job=$!
    await_listening "$dir/ours.err" > /dev/null
    kernel --close-second $ip $port &
    kernel_job=$!
else
    kernel -l $ip $port &
    kernel_job=$!
    await_listening "$dir/kernel.err"
    ours --close-second --count 2 $ip $port &
    ours_job=$!
fi
# The kernel's view of its sockets and link groups while they live.
while kill -0 $ours_job 2>/dev/null || kill -0 $kernel_job 2>/dev/null; do
    "$tool" diag >> "$dir/diag" || true
    lgrs >> "$dir/lgr.seen"
    sleep 0.2
done &

# Waits up to $1 s until the command after $2 succeeds; else says $2 is missing and fails.
await() {
    local seconds=$1 what=$2
    shift 2
    for _ in $(seq $((seconds * 5))); do
        "$@" && return 0
        sleep 0.2
    done
    echo "after $seconds s: $what is missing"
    cat "$dir/ours.err"
    "$tool" lgr
    "$tool" diag cursors
    exit 1
}
# The kernel's links in groups it made since the test began: "DEVICE GID > PEER_GID".
kernel_links() {
    "$tool" lgr | awk -v old=" $(tr '\n' ' ' < "$dir/lgr.before")" \
        '$1 == "link" && index(old, " " $2 " ") == 0 { print $4, $5, $6, $7 }'
}
# smc-nc's paths, from its last "links N: LOCAL>PEER ..." line.
our_paths() { grep -o 'links [0-9]*:.*' "$dir/ours.err" | tail -n 1; }
rxe1=192.0.2.3
on_rxe1() {
    kernel_links | grep -q "^rxe1 .*:c000:0203 > .*:c000:0203$" &&
        our_paths | grep -q " $rxe1>$rxe1"
}
off_rxe1() {
    local kernel ours
    kernel=$(kernel_links) ours=$(our_paths)
    [[ -n $kernel && -n $ours && $ours != *" $rxe1>"* ]] && ! grep -q '^rxe1 ' <<< "$kernel"
}
arrived() {
    (($(stat -c %s "$dir/ours.out") >= $1 && $(stat -c %s "$dir/kernel.out") >= $1))
}
await 60 "the second link on rxe1 at both ends" on_rxe1
await 60 "the first half of the stream" arrived $((2 * quarter))
ip link set dummy1 down
await 30 "the loss of the link on rxe1 at both ends" off_rxe1
touch "$dir/gate1"
await 60 "the third quarter after the failover" arrived $((3 * quarter))
ip link set dummy1 up
await 60 "the link on rxe1 back at both ends" on_rxe1
touch "$dir/gate2"
wait $ours_job && wait $kernel_job || { echo "a peer failed"; cat "$dir/ours.err"; exit 1; }
wait
cat "$dir/ours.err"

cmp -s "$dir/ours.in" "$dir/kernel.out" || { echo "kernel received other bytes"; exit 1; }
cmp -s "$dir/kernel.in" "$dir/ours.out" || { echo "smc-core received other bytes"; exit 1; }
! grep -q 'no SMC TCP option' "$dir/ours.err" || { echo "smc-nc had no TCP option"; exit 1; }
[[ $(grep -c '^smc-nc: SMC-Rv2 rxe0,rxe1$' "$dir/ours.err") == 2 ]] ||
    { echo "smc-nc did not say SMC-Rv2 twice"; exit 1; }
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
group_gone() {
    lgrs > "$dir/lgr.now"
    [[ -z $(comm -13 "$dir/lgr.before" "$dir/lgr.now") ]]
}
for _ in $(seq 50); do
    group_gone && break
    sleep 0.1
done
group_gone || { echo "the kernel's link group outlived smc-nc by 5 s"; exit 1; }
# What the kernel received from us, in order (its type byte carries the version on top).
names=(- CONFIRM_LINK ADD_LINK ADD_LINK_CONT DELETE_LINK REQ_ADD_LINK CONFIRM_RKEY TEST_LINK
    CONFIRM_RKEY_CONT DELETE_RKEY)
sed -n 's/.*llcrx:.* type=\(0x[0-9a-f]*\) flags=\(0x[0-9a-f]*\).*/\1 \2/p' "$llc" > "$dir/llc"
# DELETE_LINK ALL need not be the last: an answer on another link (the kernel's DELETE_RKEY
# as its socket goes) can overtake it.
summary= single=0 adds=0 alls=0
while read -r type flags; do
    type=$((type & 15)) all=$((type == 4 && flags & 0x40 ? 1 : 0))
    summary+=${names[type]:-?}$( ((flags & 0x80)) && echo '(resp)' || true)
    summary+="$( ((all)) && echo '(all)' || true) "
    single=$((single + (type == 4 && !all))) adds=$((adds + (type == 2))) alls=$((alls + all))
done < "$dir/llc"
echo "kernel-llc ($role): $summary"
((single >= 1)) || { echo "the kernel got no DELETE_LINK of one link from us"; exit 1; }
((adds >= 2)) || { echo "the kernel got $adds ADD_LINKs from us, not two or more"; exit 1; }
((alls == 1)) || { echo "the kernel got $alls DELETE_LINK ALLs from us, not one"; exit 1; }
echo "kernel-smcr ($role): $(uname -r), $mib MiB each way, the link on rxe1 lost and back," \
    "a second connection in the same link group, SMC-R by SMC_DIAG"
