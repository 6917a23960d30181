#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The kernel's SMC client meets smc-core's server (interop milestone 0): with the SMC TCP
# option in our SYN-ACK (the stack's BPF sock_ops program) the kernel sends a PROPOSAL, which we
# take (SMC-Rv2); without it the kernel sends none and falls back (PEERNOSMC). Both times the
# bytes arrive intact. Usage: kernel_proposal_test.sh BUILD_DIR. It changes
# the kernel's SMC setup and attaches a BPF program, so it runs only in the rxe guest
# (run-in-guest.sh --kernel 6.12), and skips (77) elsewhere.
set -euo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/needs_kernel.sh"
source "$(dirname "$0")/listening.sh" # tests/lib/, copied beside this script
bash "$(dirname "$0")/setup.sh" "$build"
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
head -c $((1 << 20)) /dev/urandom > "$dir/data"

# $1: the port; then smc-nc's flags. Prints the server's verdict.
serve_once() {
    local port=$1
    shift
    rm -f "$dir/server.err" # the previous server's would do for the wait below
    "$build/smc/tools/smc-nc" -v --smcr rxe0 "$@" -l 192.0.2.1 "$port" \
        < "$dir/data" > "$dir/server.got" 2> "$dir/server.err" &
    await_listening "$dir/server.err" > /dev/null
    timeout 30 "$build/tests/kernel-smc-nc" 192.0.2.1 "$port" < "$dir/data" > "$dir/client.got"
    wait
    cmp -s "$dir/data" "$dir/server.got" && cmp -s "$dir/data" "$dir/client.got" ||
        { echo "bytes differ"; exit 1; }
    grep -E '^smc-nc: (TCP|SMC)' "$dir/server.err"
}
with=$(serve_once 7101)
without=$(serve_once 7102 --no-tcp-option)
echo "with the option:    $with"
echo "without the option: $without"
[[ $with == *SMC-Rv2* ]] || { echo "no SMC-Rv2 despite the option"; exit 1; }
[[ $without == *PEERNOSMC* ]] || { echo "expected PEERNOSMC without the option"; exit 1; }
echo "kernel-proposal: $(uname -r) proposes SMC to us only with the option; bytes intact"
