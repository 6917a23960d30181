#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two hosts, a NIC pulled: two qemu guests joined by two UDP socket netdevs, rxe on each NIC.
# An smc-nc stream each way on a link group with two symmetric links; the client guest sets a
# NIC down mid-stream (the stream moves to the other link) and up again (the group gets its
# second link back). Passes when both checksums match and the client saw 2, 1, then 2 links.
# Usage: tests/rxe/two_hosts.sh [--mib N] [--pull 0|1] [--timeout SECONDS] BUILD_DIR
set -euo pipefail
mib=40 pull=0 timeout=420
while [[ $# -gt 1 ]]; do
    case $1 in
    --mib) mib=$2; shift 2 ;;
    --pull) pull=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    *) sed -n '3,8p' "$0" >&2; exit 2 ;;
    esac
done
[[ $# -eq 1 ]] || { sed -n '3,8p' "$0" >&2; exit 2; }
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
out=$build/two-hosts
rm -rf "$out"
mkdir -p "$out"
base=$((20000 + RANDOM % 20000)) # the guests' UDP ports on the host: base+10..base+21
# The guests see the build directory, not necessarily the sources (the guest's /tmp is its own).
cp "$here/two_hosts_guest.sh" "$here/../lib/listening.sh" "$out/"

for host in 1 2; do
    role=server
    [[ $host == 2 ]] && role=client
    "$here/run-in-guest.sh" --pair "$host:$base" --timeout "$timeout" "$build" -- \
        bash "$out/two_hosts_guest.sh" "$role" "$out" "$mib" "$pull" > "$out/guest$host.log" 2>&1 &
done
status=0
wait %1 || status=$?
wait %2 || status=$?
for f in guest1.log server.err guest2.log client.err; do
    echo "--- $f"
    cat "$out/$f" 2>/dev/null || true
done
[[ $status == 0 ]] || { echo "two-hosts: a guest failed ($status)"; exit 1; }
for f in server.sent client.got client.sent server.got; do
    [[ -s $out/$f ]] || { echo "two-hosts: no $f"; exit 1; }
done
ok=1
check() { # $1 sent, $2 received
    echo "$3: sent $(cut -c1-16 "$out/$1"), received $(cut -c1-16 "$out/$2")"
    cmp -s "$out/$1" "$out/$2" || { echo "$3: checksums differ"; ok=0; }
}
check server.sent client.got "server to client"
check client.sent server.got "client to server"
grep -q '^smc-nc: SMC-Rv2 ' "$out/server.err" && grep -q '^smc-nc: SMC-Rv2 ' "$out/client.err" ||
    { echo "two-hosts: not SMC-R"; ok=0; }
seen=$(grep -o 'links [0-9]*:' "$out/client.err" | tr -d ' :' | tr '\n' ' ')
[[ $seen == *"links2 links1 links2"* ]] || { echo "two-hosts: the client's links went: $seen"; ok=0; }
[[ $ok == 1 ]] || exit 1
echo "two-hosts: $mib MiB each way, eth$pull pulled and back: checksums intact, two links again"
