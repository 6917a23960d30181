# SPDX-License-Identifier: MIT
# await_listening FILE [SECONDS]: for scripts that start a server in the background with its
# stderr in FILE. Remove FILE before starting the server: the redirection truncates it only
# once the server's process runs, so an old "listening" line could be read first. Waits (10 s
# by default) for the server's "NAME: listening" line (smc-nc's ends "on port N") and prints
# the port, if the line has one; else shows FILE and fails.
await_listening() {
    local file=$1 seconds=${2:-10} line
    for _ in $(seq $((seconds * 10))); do
        if line=$(grep -m1 -E '^[a-z-]+: listening( on port [0-9]+)?$' "$file" 2>/dev/null); then
            [[ $line =~ port\ ([0-9]+)$ ]] && echo "${BASH_REMATCH[1]}"
            return 0
        fi
        sleep 0.1
    done
    echo "no server listening after $seconds s; its stderr ($file):" >&2
    cat "$file" >&2 2>/dev/null
    return 1
}
