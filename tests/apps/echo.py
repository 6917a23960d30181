# SPDX-License-Identifier: MIT
# A real program's sockets for tests/apps: "server PORTFILE" answers each connection with the
# length and a digest of what it read; "client PORT BYTES" sends that many bytes and prints
# the answer. Plain Python socket calls (accept4, recv, send, shutdown), nothing smc-core.
import hashlib
import socket
import sys


def payload(n):
    block = bytes(range(256)) * 256
    return (block * (n // len(block) + 1))[:n]


if sys.argv[1] == "server":
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    with open(sys.argv[2], "w") as f:
        f.write(str(s.getsockname()[1]))
    for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 1):
        c, _ = s.accept()
        digest, n = hashlib.sha256(), 0
        while True:
            d = c.recv(65536)
            if not d:
                break
            digest.update(d)
            n += len(d)
        c.sendall(f"{n} {digest.hexdigest()}".encode())
        c.close()
else:
    n = int(sys.argv[3])
    c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
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
