#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One host of tests/rxe/two_hosts.sh, in its guest: an smc-nc stream each way over SMC-R on
# rxe0 and rxe1. The client sets its NIC eth$PULL down once the group has two links, and up
# again once the connection moved, and waits until the group has two links again.
# Usage: two_hosts_guest.sh server|client OUT_DIR MIB PULL_NIC
set -euo pipefail
source "$(dirname "$0")/listening.sh" # tests/lib/, copied beside this script
role=$1 out=$2 mib=$3 pull=$4
nc=$PWD/smc/tools/smc-nc port=7000
say() { echo "$role: $(date +%T.%N | cut -c1-12) $*"; }
# Waits up to $1 seconds for the last "links" line of $2 to start with "links $3:".
links_become() {
    for _ in $(seq $(($1 * 10))); do
        [[ $(grep -o 'links [0-9]*:' "$2" | tail -n 1) == "links $3:" ]] && return 0
        sleep 0.1
    done
    say "the group did not get to $3 links"; return 1
}
# MIB random MiB, a MiB every 0.2 s: the stream outlasts the pull.
send() {
    mkfifo /tmp/sent.fifo # in the guest: 9p has no fifos
    sha256sum < /tmp/sent.fifo > "$out/$role.sent" &
    for _ in $(seq "$mib"); do head -c 1M /dev/urandom; sleep 0.2; done | tee /tmp/sent.fifo
    wait
}
if [[ $role == server ]]; then
    send | "$nc" -v --smcr rxe0,rxe1 --json "$out/server.json" -l 10.1.0.1 "$port" \
        2> "$out/server.err" | sha256sum > "$out/server.got" &
    await_listening "$out/server.err" 30 > /dev/null
    touch "$out/listening"
    wait
    say "done"
    exit 0
fi
for _ in $(seq 600); do [[ -e $out/listening ]] && break; sleep 0.1; done
[[ -e $out/listening ]] || { say "the server did not listen"; exit 1; }
send | "$nc" -v --smcr rxe0,rxe1 --json "$out/client.json" 10.1.0.1 "$port" \
    2> "$out/client.err" | sha256sum > "$out/client.got" &
links_become 60 "$out/client.err" 2
sleep 1
say "eth$pull down"
ip link set "eth$pull" down
links_become 30 "$out/client.err" 1
sleep 2 # the stream goes on over the other link meanwhile
say "eth$pull up"
ip link set "eth$pull" up
links_become 60 "$out/client.err" 2
wait
say "done"
