#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two processes, one SMC-R connection on rxe0: smc-nc moves SIZE_MIB random MiB each way, both
# ends say SMC-R, and each direction's SHA-256 matches. Usage: smcr_nc_test.sh SMC_NC SIZE_MIB
# [RMB_BYTES]. Skips (77) without rxe0, unless in the rxe guest, where rxe0 must be there.
set -euo pipefail
source "$(dirname "$0")/listening.sh" # tests/lib/, copied beside this script
nc=$1 size=$2 rmb=${3:-65536}
if [[ ! -e /sys/class/infiniband/rxe0 ]]; then
    [[ -n ${SMC_RXE_GUEST:-} ]] && { echo "no rxe0 in the rxe guest"; exit 1; }
    echo "no rxe0 (run in the rxe guest)"
    exit 77
fi
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
# Nothing is stored: each side hashes what it sends and what it receives (a stream that size would
# not fit the guest's tmpfs twice over).
send() {
    mkfifo "$dir/$1.fifo"
    sha256sum < "$dir/$1.fifo" > "$dir/$1.sent" &
    head -c $((size << 20)) /dev/urandom | tee "$dir/$1.fifo"
    wait # the hash, before this side of the pipe ends
}
# dummy0's address: the route and the CLC prefix are rxe0's (the guest's setup).
send down | "$nc" -v --smcr rxe0 --rmb "$rmb" -l 192.0.2.1 0 --json "$dir/server.json" \
    2> "$dir/server.err" | sha256sum > "$dir/up.got" &
port=$(await_listening "$dir/server.err")
send up | "$nc" -v --smcr rxe0 --rmb "$rmb" 192.0.2.1 "$port" 2> "$dir/client.err" |
    sha256sum > "$dir/down.got"
wait
cat "$dir/server.err" "$dir/client.err"
grep -q '^smc-nc: SMC-Rv2 rxe0$' "$dir/server.err"
grep -q '^smc-nc: SMC-Rv2 rxe0$' "$dir/client.err"
for d in up down; do
    echo "$d: sent $(cut -c1-16 "$dir/$d.sent"), received $(cut -c1-16 "$dir/$d.got")"
    cmp -s "$dir/$d.sent" "$dir/$d.got" || { echo "$d: checksums differ"; exit 1; }
done
python3 - "$dir/server.json" "$size" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["connections"]
n = int(sys.argv[2]) << 20
assert len(c) == 1 and c[0]["mode"] == "SMCR" and c[0]["link_id"] != 0, d
assert c[0]["bytes_received"] == n and c[0]["bytes_sent"] == n, d
assert d["stats"]["smcr_server"] == 1, d
PY
echo "smcr-nc: ${size} MiB each way over SMC-R on rxe0, checksums intact"
