#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prints the CLC PROPOSAL the kernel's SMC client sends (hex), for golden tests: a plain TCP
# listener in a cgroup with the SMC TCP option takes one connection from kernel-smc-nc and
# reads one CLC message. In the rxe guest only (it changes the kernel's SMC setup):
#   tests/rxe/run-in-guest.sh --kernel 6.12 build -- bash ../tests/interop/capture_proposal.sh .
set -euo pipefail
build=$(cd "$1" && pwd)
[[ -n ${SMC_RXE_GUEST:-} ]] || { echo "in the rxe guest only"; exit 2; }
bash "$(dirname "$0")/setup.sh" "$build" capture > /dev/null
rm -f /tmp/capture.ready
sh -c 'echo $$ > /sys/fs/cgroup/capture/cgroup.procs; exec python3 -c "
import socket
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((\"192.0.2.1\", 7201)); l.listen(); l.settimeout(20)
open(\"/tmp/capture.ready\", \"w\").close()
c, _ = l.accept(); c.settimeout(2); data = b\"\"
while len(data) < 8 or len(data) < int.from_bytes(data[5:7], \"big\"):
    d = c.recv(4096)
    if not d: break
    data += d
print(\"proposal\", len(data), data.hex())
"' &
for _ in $(seq 100); do [[ -e /tmp/capture.ready ]] && break; sleep 0.1; done
echo hi | timeout 10 "$build/tests/kernel-smc-nc" 192.0.2.1 7201 > /dev/null || true
wait
