#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Unmodified programs under smc-run: the bytes they exchange, and from smc-run -d's lines (the
# library's own, one per connection) whether each connection went SMC-D or stayed TCP.
# Usage: apps_test.sh SMC_RUN LIBRARY CASE [SMC_SS]
#   (CASE: echo, forked, mixed, iperf3, nginx, redis, sockperf)
# SMC_APPS_SMCR=DEVICE: the nginx and iperf3 cases over SMC-R on that RDMA device instead, to
# the address of its netdev, SMC_APPS_HOST (the rxe guest's); skipped (77) without the device.
set -euo pipefail
smc_run=$1
export SMC_RUN_PRELOAD=$2
case_name=$3
smc_ss=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
host=127.0.0.1 kind=SMC-D smc_flags=(-d)
if [ -n "${SMC_APPS_SMCR:-}" ]; then
    if [ ! -e "/sys/class/infiniband/$SMC_APPS_SMCR" ]; then
        [ -n "${SMC_RXE_GUEST:-}" ] && { echo "no $SMC_APPS_SMCR in the rxe guest"; exit 1; }
        echo "no $SMC_APPS_SMCR (run in the rxe guest)"
        exit 77
    fi
    host=${SMC_APPS_HOST:?"the address of the RDMA device netdev"}
    kind=SMC-R smc_flags=(-d --mode smcr --device "$SMC_APPS_SMCR")
fi
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; cat "$f" >&2; done; exit 1; }
need() { command -v "$1" >/dev/null || fail "$1 is not installed (.ci/install-deps installs it)"; }
# Waits for a file to have content (a server's port).
wait_for() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; fail "no $1"; }
count() { grep -c "$1" "$2" || true; }
# echo.py's server for one connection, and its client mode $1 (more arguments after the port:
# the rest), both under smc-run: the client must answer "ok" over SMC-D, the server end well.
echo_one() {
    local mode=$1 pid
    shift
    rm -f "$work/port"
    timeout 60 sh "$smc_run" -d python3 "$here/echo.py" server "$work/port" \
        2> "$work/$mode-server.log" &
    pid=$!
    wait_for "$work/port"
    answer=$(timeout 60 sh "$smc_run" -d python3 "$here/echo.py" "$mode" "$(cat "$work/port")" \
        "$@" 2> "$work/$mode-client.log") || fail "$mode failed"
    [ "$answer" = ok ] || fail "$mode: $answer"
    [ "$(count 'client SMC-D' "$work/$mode-client.log")" = 1 ] || fail "$mode: not SMC-D"
    wait "$pid" || fail "$mode: its server failed"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# What the processes named $1 published (smc-ss): "SERVER CLIENT FALLBACKS" summed, the
# connections of this run's kind (SMC-D or SMC-R); $2: only the children of that pid.
published() {
    [ -n "$smc_ss" ] || { echo "- - -"; return; }
    "$smc_ss" --json > "$work/smc-ss.json" || fail "smc-ss"
    local pids=""
    [ -n "${2:-}" ] && pids=$(pgrep -P "$2" | tr '\n' ' ')
    python3 - "$1" "$work/smc-ss.json" "$kind" "$pids" <<'PY'
import json, sys
pids = {int(p) for p in sys.argv[4].split()}
procs = [p for p in json.load(open(sys.argv[2]))
         if p["command"] == sys.argv[1] and (not pids or p["pid"] in pids)]
st = [p["smcss"]["stats"] for p in procs]
k = "smcd" if sys.argv[3] == "SMC-D" else "smcr"
fallbacks = sum(sum(s["server_fallbacks"].values()) + sum(s["client_fallbacks"].values()) for s in st)
print(sum(s[k + "_server"] for s in st), sum(s[k + "_client"] for s in st), fallbacks)
PY
}
# The published view agrees: at least $2 server connections of this kind in processes named $1
# (children of pid $3 only, if given), and no fallback (skipped when no smc-ss is given).
expect_published() {
    local server client fallbacks
    read -r server client fallbacks < <(published "$1" "${3:-}")
    [ "$server" = - ] && return 0
    [ "$server" -ge "$2" ] || fail "smc-ss: $1 published $server $kind server connections"
    [ "$fallbacks" = 0 ] || fail "smc-ss: $1 published $fallbacks fallbacks"
}

# An echo server and client, each under smc-run or not ($1, $2: "smc" or "tcp"); $5: the
# client's mode (echo.py's "client" or "nbclient"); $6 "published": the server's published view
# is checked too, before a plain client (no smc-run) lets it end.
echo_pair() {
    local server=$1 client=$2 bytes=$3 tag=$4 mode=${5:-client} check=${6:-}
    local run_server=() run_client=() conns=1
    [ "$server" = smc ] && run_server=(sh "$smc_run" -d)
    [ "$client" = smc ] && run_client=(sh "$smc_run" -d)
    [ -n "$check" ] && conns=2
    rm -f "$work/port"
    timeout 60 "${run_server[@]}" python3 "$here/echo.py" server "$work/port" "$conns" \
        2> "$work/$tag-server.log" &
    local pid=$!
    wait_for "$work/port"
    local answer
    answer=$(timeout 60 "${run_client[@]}" python3 "$here/echo.py" "$mode" "$(cat "$work/port")" \
        "$bytes" 2> "$work/$tag-client.log") || fail "$tag: client failed"
    if [ -n "$check" ]; then
        expect_published python3 1 "$pid"
        timeout 60 python3 "$here/echo.py" client "$(cat "$work/port")" 0 > /dev/null ||
            fail "$tag: the plain client that ends the server"
    fi
    wait "$pid" || fail "$tag: server failed"
    [ "$answer" = ok ] || fail "$tag: $answer"
}

case $case_name in
echo)
    need python3
    # Both under smc-run: SMC-D, and 8 MiB arrive whole, in order (digest), both ways.
    echo_pair smc smc $((8 << 20)) smcd client published
    [ "$(count 'client SMC-D' "$work/smcd-client.log")" = 1 ] || fail "client not SMC-D"
    [ "$(count 'server SMC-D' "$work/smcd-server.log")" = 1 ] || fail "server not SMC-D"
    # An empty stream: the end of it alone goes across.
    echo_pair smc smc 0 empty
    [ "$(count 'client SMC-D' "$work/empty-client.log")" = 1 ] || fail "empty: client not SMC-D"
    # A non-blocking connect from a socket already in an epoll set: EINPROGRESS, then writable
    # when the handshake is over, and the registration follows the number onto the connection.
    echo_pair smc smc $((2 << 20)) nonblocking nbclient published
    [ "$(count 'client SMC-D' "$work/nonblocking-client.log")" = 1 ] || fail "nbclient not SMC-D"
    # One process both ends of 64 connections at once, in one event loop (more than a pool of
    # handshake threads): every connection is made, over SMC-D.
    answer=$(timeout 60 sh "$smc_run" -d python3 "$here/echo.py" loop 64 2> "$work/loop.log") ||
        fail "loop failed"
    [ "$answer" = ok ] || fail "loop: $answer"
    [ "$(count 'client SMC-D' "$work/loop.log")" = 64 ] || fail "loop: clients not SMC-D"
    [ "$(count 'server SMC-D' "$work/loop.log")" = 64 ] || fail "loop: servers not SMC-D"
    # A server that reads first from a non-blocking socket, finds nothing (its handshake
    # answers the client meanwhile), then speaks first, non-blocking or made blocking again;
    # and one that closes such a connection: the client sees its end.
    rm -f "$work/port"
    timeout 60 sh "$smc_run" -d python3 "$here/echo.py" greeter "$work/port" \
        > "$work/greeter.out" 2> "$work/greeter.log" &
    wait_for "$work/port"
    answer=$(timeout 60 sh "$smc_run" -d python3 "$here/echo.py" greeted "$(cat "$work/port")" \
        2> "$work/greeted.log") || fail "greeted failed"
    wait $! || fail "greeter failed"
    [ "$answer" = ok ] && [ "$(cat "$work/greeter.out")" = ok ] ||
        fail "greeter: $answer, $(cat "$work/greeter.out")"
    [ "$(count 'client SMC-D' "$work/greeted.log")" = 3 ] || fail "greeted: clients not SMC-D"
    [ "$(count 'server SMC-D' "$work/greeter.log")" -ge 2 ] || fail "greeter: not SMC-D"
    # Connections closed while still in an epoll set, as nginx closes them: the set reports
    # only the live one and takes the next one's number (usually the same) anew, and the
    # server's socket pairs serve its later connections (its published count), unless
    # SMC_RUN_REUSE=0 says not to.
    for reuse in 1 0; do
        rm -f "$work/port"
        SMC_RUN_REUSE=$reuse timeout 60 sh "$smc_run" -d python3 "$here/echo.py" server \
            "$work/port" 5 2> "$work/epoll-server-$reuse.log" &
        pid=$!
        wait_for "$work/port"
        answer=$(timeout 60 sh "$smc_run" -d python3 "$here/echo.py" epollclient \
            "$(cat "$work/port")" 65536 4 2> "$work/epoll-client-$reuse.log") ||
            fail "epollclient failed"
        [ "$answer" = ok ] || fail "epollclient: $answer"
        [ "$(count 'client SMC-D' "$work/epoll-client-$reuse.log")" = 4 ] ||
            fail "epollclient not SMC-D"
        if [ -n "$smc_ss" ]; then
            "$smc_ss" --json > "$work/smc-ss.json" || fail "smc-ss"
            # The server: the one python3 under smc-run still running.
            reused=$(python3 -c 'import json, sys
print(sum(p["smcss"]["stats"]["ready_pairs_reused"] for p in json.load(open(sys.argv[1]))
          if p["command"] == "python3"))' "$work/smc-ss.json")
            if [ $reuse = 1 ]; then
                [ "$reused" -ge 3 ] || fail "epoll: the server reused $reused socket pairs of 4"
            else
                [ "$reused" = 0 ] || fail "epoll: SMC_RUN_REUSE=0, yet $reused pairs reused"
            fi
        fi
        timeout 60 python3 "$here/echo.py" client "$(cat "$work/port")" 0 > /dev/null ||
            fail "epoll: the plain client that ends the server"
        wait "$pid" || fail "epoll: server failed"
    done
    # A connection's number left behind in a grandchild started by posix_spawn, inherited or
    # sent to it during the handshake: its socket pair is not reused under it (the copy there
    # sees that connection's end).
    for how in inherit pass; do
        rm -f "$work/port"
        timeout 60 sh "$smc_run" -d python3 "$here/echo.py" server "$work/port" 4 \
            2> "$work/spawn-server-$how.log" &
        pid=$!
        wait_for "$work/port"
        answer=$(timeout 60 sh "$smc_run" -d python3 "$here/echo.py" spawnclient \
            "$(cat "$work/port")" 3 $([ $how = pass ] && echo pass) \
            2> "$work/spawn-client-$how.log") || fail "spawnclient $how failed"
        [ "$answer" = ok ] || fail "spawnclient $how: $answer"
        [ "$(count 'client SMC-D' "$work/spawn-client-$how.log")" = 4 ] ||
            fail "spawnclient $how: not SMC-D"
        wait "$pid" || fail "spawn $how: server failed"
    done
    # sendmmsg(2): three messages in one call, each whole, in order; the answer by recvmmsg(2).
    echo_one mmsgclient 300000
    # splice(2) from a pipe into the connection and from it into a pipe: every byte, in order.
    echo_one spliceclient 1000000
    # A daemon's start (listen, fork, the parent exits): the child holds none of its parent's
    # names.
    answer=$(timeout 60 sh "$smc_run" python3 "$here/echo.py" daemonize "$work/daemon-port") ||
        fail "daemonize failed"
    [ "$answer" = ok ] || fail "daemonize: $answer"
    # SO_RCVBUF set before connect and on the listener sizes each side's buffer (smc-ss shows).
    if [ -n "$smc_ss" ]; then ECHO_RCVBUF=20000 echo_one bufclient 100000 "$smc_ss"; fi
    # inetd's way: the server accepts, and a new program (fork and exec) serves each connection
    # on its standard input and output, then exits without closing them: by exit(3), and by
    # _exit(2) (no atexit handler runs). Either way the client reads the answer, then the end.
    for how in exit _exit; do
        rm -f "$work/port"
        timeout 60 sh "$smc_run" -d python3 "$here/echo.py" inetd "$work/port" 2 \
            $([ $how = _exit ] && echo _exit) 2> "$work/inetd-server-$how.log" &
        pid=$!
        wait_for "$work/port"
        for i in 1 2; do
            answer=$(timeout 60 sh "$smc_run" -d python3 "$here/echo.py" client \
                "$(cat "$work/port")" 300000 2>> "$work/inetd-client-$how.log") ||
                fail "inetd $how: client $i failed"
            [ "$answer" = ok ] || fail "inetd $how: client $i: $answer"
        done
        wait "$pid" || fail "inetd $how: server failed"
        [ "$(count 'client SMC-D' "$work/inetd-client-$how.log")" = 2 ] ||
            fail "inetd $how: clients not SMC-D"
        [ "$(count 'fd 0: server SMC-D' "$work/inetd-server-$how.log")" = 2 ] ||
            fail "inetd $how: the programs it started did not serve over SMC-D"
    done
    # exit(3) from a signal handler while the program waits in a blocking recv (simple C
    # programs end so on SIGINT or an alarm): it exits, and the server sees the stream's end.
    rm -f "$work/port"
    timeout 60 sh "$smc_run" -d python3 "$here/echo.py" server "$work/port" 1 count \
        > "$work/exit-server.out" 2> "$work/exit-server.log" &
    pid=$!
    wait_for "$work/port"
    status=0
    timeout 30 sh "$smc_run" -d "$SMC_APPS_EXIT_IN_HANDLER" "$(cat "$work/port")" \
        2> "$work/exit-client.log" || status=$?
    [ "$status" = 3 ] || fail "exit in a signal handler: status $status (124: it hung)"
    [ "$(count 'client SMC-D' "$work/exit-client.log")" = 1 ] || fail "exit in a handler: not SMC-D"
    wait "$pid" || fail "exit in a handler: the server saw no end of the stream"
    grep -q '^0 ' "$work/exit-server.out" || fail "exit in a handler: server read $(cat "$work/exit-server.out")"
    # C's stdio on the connection: fdopen(3), fwrite, fread, and fclose that ends it.
    echo_one stdioclient 500000
    # Signal handlers interrupt a blocking receive on an SMC-D connection as on TCP: Python's
    # (no SA_RESTART) make it fail with EINTR, so a raising handler ends it and a returning one
    # lets Python receive again.
    echo_one sigclient
    # close_range(2) ends a connection as close(2) does: the server reads both streams to
    # their end (it would wait forever for one the shim did not close).
    rm -f "$work/port"
    timeout 60 sh "$smc_run" -d python3 "$here/echo.py" server "$work/port" 2 count \
        > "$work/range-server.out" 2> "$work/range-server.log" &
    wait_for "$work/port"
    answer=$(timeout 60 sh "$smc_run" -d python3 "$here/echo.py" rangeclient "$(cat "$work/port")" \
        $((1 << 20)) 2> "$work/range-client.log") || fail "rangeclient failed"
    [ "$answer" = ok ] || fail "rangeclient: $answer"
    wait $! || fail "close_range: the server did not see both ends"
    [ "$(sort -u "$work/range-server.out" | wc -l)" = 1 ] && [ "$(wc -l < "$work/range-server.out")" = 2 ] ||
        fail "close_range: server counted $(cat "$work/range-server.out")"
    grep -q "^$((1 << 20)) " "$work/range-server.out" || fail "close_range: lost bytes"
    [ "$(count 'client SMC-D' "$work/range-client.log")" = 2 ] || fail "rangeclient not SMC-D"
    ;;
forked)
    need python3
    # A forking server: the parent accepts and closes, each child serves its connection over
    # SMC-D (its first read begins the handshake, in the child).
    rm -f "$work/port"
    timeout 60 sh "$smc_run" -d python3 "$here/echo.py" forkserver "$work/port" 2 \
        2> "$work/fork-server.log" &
    pid=$!
    wait_for "$work/port"
    for i in 1 2; do
        answer=$(timeout 60 sh "$smc_run" -d python3 "$here/echo.py" client "$(cat "$work/port")" \
            $((4 << 20)) 2>> "$work/fork-client.log") || fail "forked: client $i failed"
        [ "$answer" = ok ] || fail "forked: client $i: $answer"
    done
    wait "$pid" || fail "forked: server failed"
    [ "$(count 'client SMC-D' "$work/fork-client.log")" = 2 ] || fail "forked: clients not SMC-D"
    [ "$(count 'server SMC-D' "$work/fork-server.log")" = 2 ] || fail "forked: children not SMC-D"
    # Each from a child, none from the parent that accepted.
    [ "$(grep 'server SMC-D' "$work/fork-server.log" | cut -d'[' -f2 | cut -d']' -f1 | sort -u | wc -l)" = 2 ] ||
        fail "forked: not two children"
    ;;
mixed)
    need python3
    # One side without smc-run: plain TCP at once, no handshake attempted, bytes intact.
    echo_pair smc tcp $((1 << 20)) plain-client
    [ "$(count 'SMC announced' "$work/plain-client-server.log")" = 1 ] || fail "listener not announced"
    [ "$(count 'server SMC' "$work/plain-client-server.log")" = 0 ] || fail "plain client went SMC"
    echo_pair tcp smc $((1 << 20)) plain-server
    [ "$(count 'SMC' "$work/plain-server-client.log")" = 0 ] || fail "plain server went SMC"
    ;;
iperf3)
    need iperf3
    need python3
    port=$(free_port)
    # One server for both directions: what it published is read before it stops.
    timeout 120 sh "$smc_run" "${smc_flags[@]}" iperf3 -s -p "$port" -B $host \
        > "$work/server.out" 2> "$work/server.log" &
    pid=$!
    for _ in $(seq 100); do grep -q 'SMC announced' "$work/server.log" && break; sleep 0.1; done
    # 64 MiB each way; 16 over soft-RoCE, whose emulated CPU is slow.
    mib=64; [ "$kind" = SMC-R ] && mib=16
    for direction in forward reverse; do
        flag=(); [ $direction = reverse ] && flag=(-R)
        timeout 60 sh "$smc_run" "${smc_flags[@]}" iperf3 -c $host -p "$port" -n ${mib}M -J "${flag[@]}" \
            > "$work/$direction.json" 2> "$work/$direction-client.log" || fail "iperf3 $direction"
        read -r sent received < <(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["end"]; print(e["sum_sent"]["bytes"], e["sum_received"]["bytes"])' "$work/$direction.json")
        # iperf3's receiver may report before the last bytes are counted (TCP does so too).
        [ "$sent" -ge $((mib << 20)) ] || fail "$direction: sent $sent bytes"
        [ "$received" -ge $((mib * 15 << 16)) ] || fail "$direction: received $received bytes"
        # The control connection and the data stream.
        [ "$(count "client $kind" "$work/$direction-client.log")" = 2 ] || fail "$direction: client not $kind"
    done
    # The server's own view: both runs' control and data connections, no fallback.
    expect_published iperf3 4
    kill "$pid"
    [ "$(count "server $kind" "$work/server.log")" = 4 ] || fail "server not $kind"
    ;;
nginx)
    need nginx
    need curl
    need wrk
    need python3
    port=$(free_port)
    proxy_port=$(free_port)
    mkdir -p "$work/html"
    head -c $((3 << 20)) /dev/urandom > "$work/html/big.bin"
    echo hello > "$work/html/index.html"
    # Two workers that accept on the master's listener; the workers run as this user (SMC-D
    # is between processes of one user: docs/design.md, cross-process loopback-ism).
    cat > "$work/nginx.conf" <<CONF
daemon off;
master_process on;
worker_processes 2;
user $(id -un) $(id -gn);
error_log stderr notice;
pid $work/nginx.pid;
events { use epoll; worker_connections 256; }
http {
    access_log off;
    sendfile on;
    keepalive_timeout 30;
    client_body_temp_path $work/body;
    proxy_temp_path $work/proxy;
    fastcgi_temp_path $work/fastcgi;
    uwsgi_temp_path $work/uwsgi;
    scgi_temp_path $work/scgi;
    server { listen $host:$port; root $work/html; }
    # A proxy to the server above: nginx's upstream sockets join epoll before they connect.
    server { listen $host:$proxy_port; location / { proxy_pass http://$host:$port; } }
}
CONF
    timeout 120 sh "$smc_run" "${smc_flags[@]}" nginx -p "$work" -c "$work/nginx.conf" -e stderr \
        2> "$work/nginx-server.log" &
    for _ in $(seq 100); do grep -q 'start worker process' "$work/nginx-server.log" && break; sleep 0.1; done
    sleep 0.3
    # A file through sendfile(2), and two requests on one keep-alive connection.
    timeout 30 sh "$smc_run" "${smc_flags[@]}" curl -sS -o "$work/got.bin" "http://$host:$port/big.bin" \
        2> "$work/curl-client.log" || fail "curl big.bin"
    cmp "$work/html/big.bin" "$work/got.bin" || fail "big.bin arrived changed"
    [ "$(count "client $kind" "$work/curl-client.log")" = 1 ] || fail "curl not $kind"
    # The same through the proxy: nginx is then the client of a non-blocking connect too.
    timeout 30 sh "$smc_run" "${smc_flags[@]}" curl -sS -o "$work/proxied.bin" "http://$host:$proxy_port/big.bin" \
        2> "$work/proxy-client.log" || fail "curl through the proxy"
    cmp "$work/html/big.bin" "$work/proxied.bin" || fail "big.bin arrived changed through the proxy"
    [ "$(count "client $kind" "$work/nginx-server.log")" = 1 ] || fail "nginx's upstream not $kind"
    got=$(timeout 30 sh "$smc_run" "${smc_flags[@]}" curl -sS "http://$host:$port/" \
        "http://$host:$port/index.html" 2> "$work/keepalive-client.log") || fail "curl keep-alive"
    [ "$got" = "$(printf 'hello\nhello')" ] || fail "keep-alive: got '$got'"
    [ "$(count "client $kind" "$work/keepalive-client.log")" = 1 ] || fail "keep-alive: not one $kind connection"
    # wrk: 8 connections for a second, every request answered.
    timeout 30 sh "$smc_run" "${smc_flags[@]}" wrk -t 2 -c 8 -d 1 "http://$host:$port/" \
        > "$work/wrk.out" 2> "$work/wrk-client.log" || fail "wrk"
    grep -q 'Requests/sec' "$work/wrk.out" || fail "wrk: no result"
    ! grep -q -E 'Socket errors|Non-2xx' "$work/wrk.out" || fail "wrk: errors: $(cat "$work/wrk.out")"
    [ "$(count "client $kind" "$work/wrk-client.log")" -ge 8 ] || fail "wrk: not $kind"
    expect_published nginx 12
    kill -QUIT "$(cat "$work/nginx.pid")"
    wait %1 || true
    [ "$(count "server $kind" "$work/nginx-server.log")" -ge 12 ] || fail "nginx: not $kind"
    [ "$(count 'fallback' "$work/nginx-server.log")" = 0 ] || fail "nginx: fallbacks"
    ;;
redis)
    need redis-server
    need redis-cli
    need redis-benchmark
    need python3
    port=$(free_port)
    timeout 120 sh "$smc_run" -d redis-server --port "$port" --bind 127.0.0.1 --save '' \
        --appendonly no --daemonize no --dir "$work" > "$work/redis.out" 2> "$work/redis-server.log" &
    for _ in $(seq 100); do grep -q 'listening, SMC announced' "$work/redis-server.log" && break; sleep 0.1; done
    sleep 0.2
    timeout 20 sh "$smc_run" -d redis-cli -p "$port" set greeting "hello over smc" \
        > "$work/set.out" 2> "$work/cli-client.log" || fail "redis-cli set"
    got=$(timeout 20 sh "$smc_run" -d redis-cli -p "$port" get greeting 2>> "$work/cli-client.log") ||
        fail "redis-cli get"
    [ "$(cat "$work/set.out")" = OK ] && [ "$got" = "hello over smc" ] || fail "redis-cli: got '$got'"
    [ "$(count 'client SMC-D' "$work/cli-client.log")" = 2 ] || fail "redis-cli not SMC-D"
    # redis-benchmark: 20 clients, 1 KiB values; every request answered (-n per test).
    timeout 60 sh "$smc_run" -d redis-benchmark -p "$port" -t set,get -n 4000 -c 20 -d 1024 -q \
        > "$work/bench.out" 2> "$work/bench-client.log" || fail "redis-benchmark"
    grep -q 'SET: .* requests per second' "$work/bench.out" || fail "redis-benchmark: no SET result"
    grep -q 'GET: .* requests per second' "$work/bench.out" || fail "redis-benchmark: no GET result"
    [ "$(count 'client SMC-D' "$work/bench-client.log")" -ge 40 ] || fail "redis-benchmark not SMC-D"
    expect_published redis-server 42
    kill %1
    wait %1 || true
    [ "$(count 'fallback' "$work/redis-server.log")" = 0 ] || fail "redis: fallbacks"
    ;;
sockperf)
    need sockperf
    need python3
    port=$(free_port)
    timeout 60 sh "$smc_run" -d sockperf sr --tcp -i 127.0.0.1 -p "$port" \
        > "$work/sockperf-server.out" 2> "$work/sockperf-server.log" &
    for _ in $(seq 100); do grep -q 'listening, SMC announced' "$work/sockperf-server.log" && break; sleep 0.1; done
    sleep 0.2
    # Ping-pong of 14-byte messages, then throughput of 64,000-byte ones, a second each.
    timeout 30 sh "$smc_run" -d sockperf pp --tcp -i 127.0.0.1 -p "$port" -t 1 -m 14 \
        > "$work/pp.out" 2> "$work/pp-client.log" || fail "sockperf pp"
    grep -q 'avg-latency=' "$work/pp.out" "$work/pp-client.log" || fail "sockperf pp: no latency"
    timeout 30 sh "$smc_run" -d sockperf tp --tcp -i 127.0.0.1 -p "$port" -t 1 -m 64000 \
        > "$work/tp.out" 2> "$work/tp-client.log" || fail "sockperf tp"
    grep -q 'BandWidth is' "$work/tp.out" "$work/tp-client.log" || fail "sockperf tp: no bandwidth"
    for run in pp tp; do
        [ "$(count 'client SMC-D' "$work/$run-client.log")" = 1 ] || fail "sockperf $run not SMC-D"
    done
    [ "$(count 'server SMC-D' "$work/sockperf-server.log")" = 2 ] || fail "sockperf server not SMC-D"
    expect_published sockperf 2
    kill %1
    ;;
*)
    fail "unknown case $case_name"
    ;;
esac
echo "apps $case_name: ok"
