# SPDX-License-Identifier: MIT
# Sourced by the interop tests: they change the kernel's SMC setup, so they run only in the
# rxe guest on Linux 6.12 or later (6.1's rxe cannot carry the kernel's SMC-R; see
# docs/kernel-interop-plan.md), and skip (exit 77) elsewhere.
if [[ -z ${SMC_RXE_GUEST:-} ]] || ! modprobe -q smc || [[ ! -e /sys/class/infiniband/rxe0 ]]; then
    echo "no kernel SMC or no rxe0 (run in the rxe guest with --kernel 6.12)"
    exit 77
fi
if ! printf '6.12\n%s\n' "$(uname -r)" | sort -V -C; then
    echo "Linux $(uname -r) is older than 6.12 (run-in-guest.sh --kernel 6.12)"
    exit 77
fi
