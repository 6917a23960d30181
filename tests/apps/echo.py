# SPDX-License-Identifier: MIT
# A real program's sockets for tests/apps: "server PORTFILE" answers each connection with the
# length and a digest of what it read; "forkserver PORTFILE N" does so as a forking server
# (socketserver: the parent accepts, a child serves) for N clients; "client PORT BYTES" sends
# that many bytes and prints the answer; "nbclient PORT BYTES" does so from a non-blocking
# socket in an edge-triggered epoll set it joined before connecting, as event loops do; "rangeclient PORT BYTES" sends
# without a shutdown and ends the connection with close_range(2) instead of close(2), twice
# (the second socket gets the number again); "loop N" is one event loop that is both ends of N
# connections at once; "inetd PORTFILE N [_exit]" serves N connections, each by a new program on its
# standard input and output ("stdio"), as inetd does (with _exit: the program ends by _exit(2)); "greeter PORTFILE" and "greeted PORT" are a server that speaks first
# from a non-blocking socket whose first read found nothing (twice: once made blocking again
# before it speaks), and one that closes it then; "epollclient PORT BYTES N" closes N
# connections one after the other while they are still in its epoll set (or replaces their
# numbers by dup2), as nginx does; "spawnclient PORT N [pass]" leaves a connection's number
# behind in a grandchild (inherited, or sent to it during the handshake) and checks that the
# copy there sees that connection's end while N more follow; "mmsgclient PORT BYTES" sends
# with sendmmsg(2) and reads the answer with recvmmsg(2); "spliceclient PORT BYTES" sends from a
# pipe and receives into one with splice(2); "stdioclient PORT BYTES" does so with C's stdio on
# the connection (fdopen, fwrite, fread, fclose); "bufclient PORT BYTES SMC_SS" checks that
# SO_RCVBUF sized its connection's buffers (and ECHO_RCVBUF the server's); "daemonize PORTFILE"
# listens, forks and exits, and its child checks it holds none of its parent's names; "sigclient PORT" has signal handlers interrupt its blocking receives. Plain
# Python socket calls (accept4, recv with and without MSG_PEEK, send, shutdown, epoll,
# close_range, SO_RCVTIMEO, posix_spawn, SCM_RIGHTS; a subprocess), nothing smc-core.
import errno
import hashlib
import os
import select
import socket
import subprocess
import sys


def payload(n):
    block = bytes(range(256)) * 256
    return (block * (n // len(block) + 1))[:n]


def listening(portfile, backlog):
    """A listener on a free loopback port, which goes to `portfile` (SO_RCVBUF set to
    $ECHO_RCVBUF first, if given)."""
    s = socket.socket()
    if "ECHO_RCVBUF" in os.environ:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(os.environ["ECHO_RCVBUF"]))
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    with open(portfile, "w") as f:
        f.write(str(s.getsockname()[1]))
    return s


def reply(c, peek):
    """Reads to the end of the stream and answers with its length and digest."""
    # A peek first: the bytes it shows are read again by the next recv, and a poll sees them
    # at once (the peek may have waited for them, asleep).
    peeked = c.recv(16, socket.MSG_PEEK) if peek else b""
    if peeked and not select.select([c], [], [], 0)[0]:
        c.sendall(b"MSG_PEEK showed bytes that a poll did not see")
        return
    digest, n = hashlib.sha256(), 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        if n == 0 and not d.startswith(peeked):
            peeked = None
        digest.update(d)
        n += len(d)
    if peeked is None:
        c.sendall(b"MSG_PEEK showed other bytes than recv read")
    else:
        c.sendall(f"{n} {digest.hexdigest()}".encode())


if sys.argv[1] == "forkserver":
    # A forking server (socketserver): the parent accepts and closes, each child serves one.
    import socketserver

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            reply(self.request, False)

    with socketserver.ForkingTCPServer(("127.0.0.1", 0), Handler) as srv:
        with open(sys.argv[2], "w") as f:
            f.write(str(srv.server_address[1]))
        for _ in range(int(sys.argv[3])):
            srv.handle_request()
elif sys.argv[1] == "server":
    s = listening(sys.argv[2], 8)
    for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 1):
        c, _ = s.accept()
        if len(sys.argv) > 4:  # "count": the length and digest to stdout, nothing back
            digest, n = hashlib.sha256(), 0
            while d := c.recv(65536):
                digest.update(d)
                n += len(d)
            print(f"{n} {digest.hexdigest()}", flush=True)
            c.close()
            continue
        reply(c, True)
        c.close()
elif sys.argv[1] == "inetd":
    # inetd's way: accept, then a new program serves the connection on its standard input and
    # output (the same socket, fork and exec), N times.
    s = listening(sys.argv[2], 8)
    for _ in range(int(sys.argv[3])):
        c, _ = s.accept()
        subprocess.run([sys.executable, __file__, "stdio", *sys.argv[4:]], stdin=c.fileno(),
                       stdout=c.fileno(), check=True)
        c.close()
elif sys.argv[1] == "stdio":
    # What inetd starts: reads standard input to its end, answers on standard output.
    import os
    digest, n = hashlib.sha256(), 0
    while d := os.read(0, 65536):
        digest.update(d)
        n += len(d)
    os.write(1, f"{n} {digest.hexdigest()}".encode())
    if sys.argv[2:] == ["_exit"]:  # no close, no atexit handler, no flush: the process just ends
        os._exit(0)
elif sys.argv[1] == "loop":
    # One event loop that is both ends of N connections at once, each a byte one way: a process
    # whose client handshakes must not wait behind its own server handshakes.
    n = int(sys.argv[2])
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(n)
    ls.setblocking(False)
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    clients, servers, sent, done = {}, {}, set(), 0
    for _ in range(n):
        c = socket.socket()
        c.setblocking(False)
        ep.register(c.fileno(), select.EPOLLOUT | select.EPOLLET)
        c.connect_ex(ls.getsockname())
        clients[c.fileno()] = c
    while done < n:
        events = ep.poll(10)
        if not events:
            print(f"MISMATCH: stuck with {done} of {n} done, {len(sent)} sent")
            sys.exit(0)
        for fd, ev in events:
            try:
                if fd == ls.fileno():
                    s, _ = ls.accept()
                    s.setblocking(False)
                    ep.register(s.fileno(), select.EPOLLIN | select.EPOLLET)
                    servers[s.fileno()] = s
                elif fd in clients and fd not in sent:
                    clients[fd].send(b"x")
                    sent.add(fd)
                elif fd in servers and servers[fd].recv(1) == b"x":
                    done += 1
            except BlockingIOError:
                pass
    print("ok")
elif sys.argv[1] == "greeter":
    # Three connections, each read first from a non-blocking socket (the client says nothing
    # until greeted): the first is then greeted and its answer read to the end; the second
    # too, after the socket was made blocking again; the third is closed at once.
    s = listening(sys.argv[2], 3)
    for i in range(3):
        c, _ = s.accept()
        c.setblocking(False)
        select.select([c], [], [], 0.2)  # the client's handshake, and maybe more, comes
        try:
            print(f"MISMATCH: a read before the greeting gave {c.recv(16)!r}")
            sys.exit(0)
        except BlockingIOError:
            pass
        if i == 2:
            c.close()
            break
        greeting, sent = b"hello", 0
        if i == 1:
            c.setblocking(True)
            c.sendall(greeting)  # blocking: it waits, never says EAGAIN
            sent = len(greeting)
        while sent < len(greeting):
            select.select([], [c], [], 10)
            try:
                sent += c.send(greeting[sent:])
            except BlockingIOError:
                pass
        c.setblocking(True)
        answer = b""
        while d := c.recv(64):
            answer += d
        c.close()
        if answer != b"hello!":
            print(f"MISMATCH: the greeted answered {answer!r}")
            sys.exit(0)
    print("ok")
elif sys.argv[1] == "greeted":
    greetings = []
    for _ in range(2):
        c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
        greeting = b""
        while len(greeting) < 5 and (d := c.recv(5 - len(greeting))):
            greeting += d
        c.sendall(greeting + b"!")
        c.shutdown(socket.SHUT_WR)
        c.close()
        greetings.append(greeting)
    # The second connection is closed unanswered: its end comes, it never hangs.
    c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
    c.settimeout(10)
    try:
        end = c.recv(16)
    except ConnectionResetError:
        end = b""
    except TimeoutError:
        print("MISMATCH: a connection its server closed did not end")
        sys.exit(0)
    ok = greetings == [b"hello", b"hello"] and end == b""
    print("ok" if ok else f"MISMATCH: {greetings!r}, {end!r}")
elif sys.argv[1] == "nbclient":
    n = int(sys.argv[3])
    data = payload(n)
    c = socket.socket()
    c.setblocking(False)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLRDHUP | select.EPOLLET)
    e = c.connect_ex(("127.0.0.1", int(sys.argv[2])))
    if e != errno.EINPROGRESS:
        print(f"MISMATCH: connect gave {errno.errorcode.get(e, e)}, not EINPROGRESS")
        sys.exit(0)
    sent, answer, writable, readable, shut = 0, b"", False, False, False
    while True:
        events = ep.poll(10)
        if not events:
            print("MISMATCH: no event in 10 s")
            sys.exit(0)
        for _, ev in events:
            writable |= bool(ev & select.EPOLLOUT)
            readable |= bool(ev & (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP))
        if writable and sent == 0 and c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            print("MISMATCH: SO_ERROR after connect")
            sys.exit(0)
        while writable and sent < n:  # edge-triggered: until EAGAIN
            try:
                sent += c.send(data[sent:sent + 65536])
            except BlockingIOError:
                writable = False
        if sent == n and not shut:
            c.shutdown(socket.SHUT_WR)
            shut = True
        while readable:
            try:
                d = c.recv(4096)
            except BlockingIOError:
                readable = False
                break
            if not d:
                expected = f"{n} {hashlib.sha256(data).hexdigest()}"
                ok = answer.decode() == expected
                print("ok" if ok else f"MISMATCH: {answer!r} != {expected!r}")
                sys.exit(0)
            answer += d
elif sys.argv[1] == "epollclient":
    # N connections one after the other, each in one epoll set and closed without leaving it
    # (nginx does so), or its number replaced by dup2: the next one's number (usually the same)
    # joins the set anew, and the set reports it alone.
    import os
    n, rounds = int(sys.argv[3]), int(sys.argv[4])
    ep = select.epoll()
    for i in range(rounds):
        c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
        try:
            ep.register(c.fileno(), select.EPOLLIN)
        except OSError as e:
            print(f"MISMATCH: round {i}: epoll register: {e}")
            sys.exit(0)
        c.sendall(payload(n))
        c.shutdown(socket.SHUT_WR)
        answer = b""
        while True:
            events = ep.poll(10)
            if [fd for fd, _ in events] != [c.fileno()]:
                print(f"MISMATCH: round {i}: epoll reported {events}, not {c.fileno()}")
                sys.exit(0)
            d = c.recv(4096)
            if not d:
                break
            answer += d
        expected = f"{n} {hashlib.sha256(payload(n)).hexdigest()}"
        if answer.decode() != expected:
            print(f"MISMATCH: round {i}: {answer!r} != {expected!r}")
            sys.exit(0)
        if i % 2:  # still in the set; the number replaced by dup2 instead of closed
            fd = c.detach()
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, fd)
            os.close(null)
            os.close(fd)
        else:
            c.close()  # still in the set
    print("ok")
elif sys.argv[1] == "spawnclient":
    # A connection's number left behind in a grandchild (posix_spawn of a shell that starts it
    # in the background and exits at once): inherited, or with "pass" sent to it (SCM_RIGHTS)
    # while its handshake is under way. Once the connection is closed here and ROUNDS others
    # follow, the copy there shows that connection's end (a hang-up), never the readiness of a
    # later one (which a socket pair reused under it would show).
    import os
    port, rounds = int(sys.argv[2]), int(sys.argv[3])
    passing = len(sys.argv) > 4

    def exchange(c):
        c.sendall(payload(1000))
        c.shutdown(socket.SHUT_WR)
        answer = b""
        while d := c.recv(4096):
            answer += d
        return answer.decode() == f"1000 {hashlib.sha256(payload(1000)).hexdigest()}"

    here, there = socket.socketpair()
    r, w = os.pipe()
    if passing:
        kept = f"socket.recv_fds(socket.socket(fileno={there.fileno()}), 1, 1)[1][0]"
    else:
        first = socket.create_connection(("127.0.0.1", port))
        kept = str(first.fileno())
    for fd in (first.fileno(), w, there.fileno()) if not passing else (w, there.fileno()):
        os.set_inheritable(fd, True)
    watcher = (
        "import select, socket, time\n"
        f"fd = {kept}\n"
        "time.sleep(1)\n"
        "p = select.poll()\n"
        "p.register(fd, select.POLLIN)\n"
        "print(p.poll(0))\n"
    )
    shell = f'python3 -c "$1" >&{w} &'
    pid = os.posix_spawn("/bin/sh", ["sh", "-c", shell, "sh", watcher], os.environ)
    os.waitpid(pid, 0)  # the shell is gone; the watcher, not our child, keeps the number
    os.close(w)
    there.close()
    if passing:
        first = socket.socket()
        first.setblocking(False)
        if first.connect_ex(("127.0.0.1", port)) != errno.EINPROGRESS:
            print("MISMATCH: a non-blocking connect did not say EINPROGRESS")
            sys.exit(0)
        socket.send_fds(here, [b"x"], [first.fileno()])
        select.select([], [first], [], 10)
        first.setblocking(True)
    ok = exchange(first)
    first.close()
    later = []  # each kept open (the server answers one at a time)
    for _ in range(rounds):
        later.append(socket.create_connection(("127.0.0.1", port)))
        ok = exchange(later[-1]) and ok
    seen = os.read(r, 4096).decode()  # after the watcher polled, the later ones still open
    hangup = any(mask & select.POLLHUP for _, mask in eval(seen or "[]"))
    if not ok:
        print("MISMATCH: an answer")
    elif not hangup:
        print(f"MISMATCH: the left-behind copy polled {seen.strip()!r}, not a hang-up")
    else:
        print("ok")
elif sys.argv[1] == "mmsgclient":
    # sendmmsg(2) (through ctypes: Python has no call of its own): three messages of two
    # pieces each in one call, then the answer checked as "client" does.
    import ctypes

    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    class Msghdr(ctypes.Structure):
        _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                    ("iov", ctypes.POINTER(Iovec)), ("iovlen", ctypes.c_size_t),
                    ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                    ("flags", ctypes.c_int)]

    class Mmsghdr(ctypes.Structure):
        _fields_ = [("hdr", Msghdr), ("len", ctypes.c_uint)]

    n = int(sys.argv[3])
    data = payload(n)
    buf = ctypes.create_string_buffer(data, n)
    cut = [n * k // 6 for k in range(7)]
    iovs = (Iovec * 6)(*[Iovec(ctypes.addressof(buf) + cut[k], cut[k + 1] - cut[k])
                         for k in range(6)])
    msgs = (Mmsghdr * 3)()
    for k in range(3):
        msgs[k].hdr.iov = ctypes.cast(ctypes.byref(iovs, 2 * k * ctypes.sizeof(Iovec)),
                                      ctypes.POINTER(Iovec))
        msgs[k].hdr.iovlen = 2
    c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
    libc = ctypes.CDLL(None, use_errno=True)
    # Bad input gets the kernel's error, not a crash: a control header longer than its buffer
    # (on a socket the shim passes through), no messages at all (on the SMC connection).
    a, b = socket.socketpair()
    control = ctypes.create_string_buffer(b"\xff\xff\xff\x7f\0\0\0\0\1\0\0\0\1\0\0\0", 16)
    bad = Msghdr(iov=ctypes.cast(ctypes.byref(iovs), ctypes.POINTER(Iovec)), iovlen=1,
                 control=ctypes.addressof(control), controllen=16)
    if libc.sendmsg(a.fileno(), ctypes.byref(bad), 0) != -1 or ctypes.get_errno() != errno.EINVAL:
        print(f"MISMATCH: a control header past its buffer: errno {ctypes.get_errno()}")
        sys.exit(0)
    if libc.sendmmsg(c.fileno(), None, 1, 0) != -1 or ctypes.get_errno() != errno.EFAULT:
        print(f"MISMATCH: sendmmsg of no messages: errno {ctypes.get_errno()}")
        sys.exit(0)
    sent = libc.sendmmsg(c.fileno(), msgs, 3, 0)
    lens = [msgs[k].len for k in range(3)]
    if sent != 3 or lens != [cut[2 * k + 2] - cut[2 * k] for k in range(3)]:
        print(f"MISMATCH: sendmmsg sent {sent} messages of {lens}, errno {ctypes.get_errno()}")
        sys.exit(0)
    c.shutdown(socket.SHUT_WR)
    # The answer with recvmmsg(2): three 16-byte messages a call, the first one waited for.
    bufs = [ctypes.create_string_buffer(16) for _ in range(3)]
    riovs = (Iovec * 3)(*[Iovec(ctypes.addressof(b), 16) for b in bufs])
    rmsgs = (Mmsghdr * 3)()
    for k in range(3):
        rmsgs[k].hdr.iov = ctypes.cast(ctypes.byref(riovs, k * ctypes.sizeof(Iovec)),
                                       ctypes.POINTER(Iovec))
        rmsgs[k].hdr.iovlen = 1
    answer = b""
    while True:
        got = libc.recvmmsg(c.fileno(), rmsgs, 3, 0x10000, None)  # MSG_WAITFORONE
        if got <= 0:
            print(f"MISMATCH: recvmmsg returned {got}, errno {ctypes.get_errno()}")
            sys.exit(0)
        lens = [rmsgs[k].len for k in range(got)]
        answer += b"".join(bufs[k].raw[:lens[k]] for k in range(got))
        if 0 in lens:
            break
    expected = f"{n} {hashlib.sha256(data).hexdigest()}"
    print("ok" if answer.decode() == expected else f"MISMATCH: {answer!r} != {expected!r}")
elif sys.argv[1] == "spliceclient":
    # splice(2) both ways: the payload from a pipe into the connection, the answer from the
    # connection into a pipe; and the kernel's errors for an offset and for no pipe at all.
    import os
    import tempfile
    import threading
    n = int(sys.argv[3])
    data = payload(n)
    c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
    r, w = os.pipe()
    with tempfile.TemporaryFile() as f:
        for how, call, code in (
                ("an offset", lambda: os.splice(c.fileno(), w, 10, offset_src=0), errno.ESPIPE),
                ("no pipe", lambda: os.splice(c.fileno(), f.fileno(), 10), errno.EINVAL)):
            try:
                call()
                print(f"MISMATCH: splice with {how} did not fail")
                sys.exit(0)
            except OSError as e:
                if e.errno != code:
                    print(f"MISMATCH: splice with {how}: {e}")
                    sys.exit(0)

    def fill():
        for at in range(0, n, 100000):
            os.write(w, data[at:at + 100000])
        os.close(w)

    filler = threading.Thread(target=fill)
    filler.start()
    sent = 0
    while k := os.splice(r, c.fileno(), 1 << 20):
        sent += k
    filler.join()
    os.close(r)
    c.shutdown(socket.SHUT_WR)
    r, w = os.pipe()
    answer = b""
    while k := os.splice(c.fileno(), w, 4096):
        answer += os.read(r, k)
    expected = f"{n} {hashlib.sha256(data).hexdigest()}"
    if sent != n:
        print(f"MISMATCH: spliced {sent} of {n} bytes")
    else:
        print("ok" if answer.decode() == expected else f"MISMATCH: {answer!r} != {expected!r}")
elif sys.argv[1] == "stdioclient":
    # C's stdio on the connection (through ctypes): fdopen(3), fwrite, fflush, fileno, fread to
    # the end of the answer, fclose (which ends the connection: the number is closed).
    import ctypes
    import os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fdopen.restype = ctypes.c_void_p
    libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
    for name in ("fflush", "fclose", "fileno"):
        getattr(libc, name).argtypes = [ctypes.c_void_p]
    libc.fwrite.argtypes = libc.fread.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                                  ctypes.c_size_t, ctypes.c_void_p]
    libc.fwrite.restype = libc.fread.restype = ctypes.c_size_t
    n = int(sys.argv[3])
    data = payload(n)
    c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
    fd = c.detach()
    f = libc.fdopen(fd, b"r+")
    if not f or libc.fileno(f) != fd:
        print(f"MISMATCH: fdopen gave {f}, fileno {libc.fileno(f) if f else None} for {fd}")
        sys.exit(0)
    wrote = libc.fwrite(data, 1, n, f)
    if wrote != n or libc.fflush(f) != 0:
        print(f"MISMATCH: fwrite took {wrote} of {n}, errno {ctypes.get_errno()}")
        sys.exit(0)
    libc.shutdown(fd, socket.SHUT_WR)
    buf = ctypes.create_string_buffer(4096)
    answer = b""
    while k := libc.fread(buf, 1, 4096, f):
        answer += buf.raw[:k]
    if libc.fclose(f) != 0:
        print(f"MISMATCH: fclose failed, errno {ctypes.get_errno()}")
        sys.exit(0)
    try:
        os.fstat(fd)
        print("MISMATCH: fclose left the number open")
        sys.exit(0)
    except OSError:
        pass
    expected = f"{n} {hashlib.sha256(data).hexdigest()}"
    print("ok" if answer.decode() == expected else f"MISMATCH: {answer!r} != {expected!r}")
elif sys.argv[1] == "daemonize":
    # A server's way to become a daemon: it listens (its stack, with the names that say "this
    # process"), forks, and the parent exits. The child must not hold the parent's names then
    # (smc-ss waited for such a name, which nobody answered).
    import time
    s = listening(sys.argv[2], 4)
    parent = os.getpid()
    if os.fork() != 0:
        os._exit(0)
    while os.getppid() == parent:
        time.sleep(0.01)
    # The publisher's name, and the device's, whose last part begins with the pid in hex.
    held = [m for m in open("/proc/net/unix").read().split()
            if m == f"@smc-core/p/{parent}" or (m.startswith("@smc-core/ism/") and
                                                m.rsplit("/", 1)[1].startswith("%08x" % parent))]
    print("ok" if not held else f"MISMATCH: the child holds its parent's names {held}")
elif sys.argv[1] == "bufclient":
    # SO_RCVBUF before connect sizes the connection's receive buffer as on Linux's SMC (half of
    # what the kernel made of it, rounded up to a buffer size: 200000 gives 256 KiB), and the
    # server's listener's its own (ECHO_RCVBUF=20000: 32 KiB): the published view of this
    # process (smc-ss, argv[4]) says so while the connection is up.
    import json
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 200000)
    c.connect(("127.0.0.1", int(sys.argv[2])))
    data = payload(int(sys.argv[3]))
    c.sendall(data)
    shown = json.loads(subprocess.run([sys.argv[4], "--json"], capture_output=True, text=True,
                                      check=True).stdout)
    local = "127.0.0.1:%d" % c.getsockname()[1]
    mine = [k for p in shown if p["pid"] == os.getpid() for k in p["smcss"]["connections"]
            if k["local"] == local]
    sizes = [(k["rmb_bytes"], k["peer_rmb_bytes"]) for k in mine]
    c.shutdown(socket.SHUT_WR)
    answer = b""
    while d := c.recv(4096):
        answer += d
    expected = f"{len(data)} {hashlib.sha256(data).hexdigest()}"
    if sizes != [(256 << 10, 32 << 10)]:
        print(f"MISMATCH: buffers (ours, the server's) {sizes}, not 256 KiB and 32 KiB")
    else:
        print("ok" if answer.decode() == expected else f"MISMATCH: {answer!r} != {expected!r}")
elif sys.argv[1] == "sigclient":
    # A blocking recv that a signal handler interrupts: Python's handlers have no SA_RESTART,
    # so the kernel's recv fails with EINTR, after which Python runs the handler and, unless it
    # raised, receives again (PEP 475). Timers that repeat: a first signal may come before the
    # receive sleeps.
    import signal
    import threading
    import time
    c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))

    def timeout(signum, frame):
        raise TimeoutError

    signal.signal(signal.SIGALRM, timeout)
    signal.setitimer(signal.ITIMER_REAL, 0.2, 0.05)
    start = time.monotonic()
    try:
        got = c.recv(16)
        print(f"MISMATCH: recv returned {got!r} instead of the handler's exception")
        sys.exit(0)
    except TimeoutError:
        pass
    signal.setitimer(signal.ITIMER_REAL, 0)
    if time.monotonic() - start > 5:
        print("MISMATCH: the handler's exception came late")
        sys.exit(0)
    # A handler that returns: the receive goes on and gets what the server answers.
    handled = 0

    def count(signum, frame):
        global handled
        handled += 1

    def send_later():
        time.sleep(0.5)
        c.sendall(b"x" * 10)
        c.shutdown(socket.SHUT_WR)

    signal.signal(signal.SIGALRM, count)
    signal.setitimer(signal.ITIMER_REAL, 0.1, 0.05)
    sender = threading.Thread(target=send_later)
    sender.start()
    answer = b""
    while d := c.recv(4096):
        answer += d
    signal.setitimer(signal.ITIMER_REAL, 0)
    sender.join()
    expected = f"10 {hashlib.sha256(b'x' * 10).hexdigest()}"
    if handled == 0:
        print("MISMATCH: no signal was handled during the receive")
    else:
        print("ok" if answer.decode() == expected else f"MISMATCH: {answer!r} != {expected!r}")
elif sys.argv[1] == "rangeclient":
    import os
    n = int(sys.argv[3])
    numbers = []
    for _ in range(2):
        c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
        c.sendall(payload(n))
        fd = c.detach()
        numbers.append(fd)
        os.closerange(fd, fd + 1)
    print("ok" if numbers[0] == numbers[1] else f"MISMATCH: numbers {numbers}")
else:
    import struct
    import time
    n = int(sys.argv[3])
    c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
    # SO_RCVTIMEO: a blocking recv with nothing coming gives up after it (EAGAIN).
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 100_000))
    began = time.monotonic()
    try:
        c.recv(1)
        print("MISMATCH: a recv with nothing sent returned")
        sys.exit(0)
    except BlockingIOError:
        if time.monotonic() - began < 0.09:
            print("MISMATCH: SO_RCVTIMEO gave up early")
            sys.exit(0)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
    # A child started meanwhile (vfork, then close_range of every descriptor, then exec) closes
    # its own descriptors, not this process's connection.
    subprocess.run(["true"], check=True)
    data = payload(n)
    # One blocking send(2) of a few MiB takes them all, as TCP's does (far more than a ring).
    first = min(n, 4 << 20)
    if first and c.send(data[:first]) != first:
        print("MISMATCH: a blocking send returned short")
        sys.exit(0)
    c.sendall(data[first:])
    c.shutdown(socket.SHUT_WR)
    answer = b""
    while True:
        d = c.recv(4096)
        if not d:
            break
        answer += d
    expected = f"{n} {hashlib.sha256(payload(n)).hexdigest()}"
    print("ok" if answer.decode() == expected else f"MISMATCH: {answer!r} != {expected!r}")
