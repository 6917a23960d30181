#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two processes, one SMC-R connection on rxe0: smc-nc moves SIZE_MIB random MiB each way and
# both ends say SMC-R. Usage: smcr_nc_test.sh SMC_NC SIZE_MIB. Skips (77) without rxe0.
set -euo pipefail
nc=$1 size=$2
[[ -e /sys/class/infiniband/rxe0 ]] || { echo "no rxe0 (run in the rxe guest)"; exit 77; }
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
head -c $((size << 20)) /dev/urandom > "$dir/up"
head -c $((size << 20)) /dev/urandom > "$dir/down"
# dummy0's address: the route and the CLC prefix are rxe0's (the guest's setup).
"$nc" -v --smcr rxe0 -l 192.0.2.1 0 --json "$dir/server.json" < "$dir/down" > "$dir/got-up" \
    2> "$dir/server.err" &
for _ in $(seq 100); do grep -q listening "$dir/server.err" && break; sleep 0.1; done
port=$(sed -n 's/.*listening on port //p' "$dir/server.err")
[[ -n $port ]] || { cat "$dir/server.err"; exit 1; }
"$nc" -v --smcr rxe0 192.0.2.1 "$port" < "$dir/up" > "$dir/got-down" 2> "$dir/client.err"
wait
cat "$dir/server.err" "$dir/client.err"
grep -q '^smc-nc: SMC-R rxe0$' "$dir/server.err"
grep -q '^smc-nc: SMC-R rxe0$' "$dir/client.err"
cmp "$dir/up" "$dir/got-up"
cmp "$dir/down" "$dir/got-down"
python3 - "$dir/server.json" "$size" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["connections"]
n = int(sys.argv[2]) << 20
assert len(c) == 1 and c[0]["mode"] == "SMCR" and c[0]["link_id"] != 0, d
assert c[0]["bytes_received"] == n and c[0]["bytes_sent"] == n, d
assert d["stats"]["smcr_server"] == 1, d
PY
echo "smcr-nc: ${size} MiB each way over SMC-R on rxe0, intact"
