// SPDX-License-Identifier: MIT
// kernel-smc-nc: netcat over the kernel's own SMC (AF_SMC sockets), the peer of smc-core in
// the interop tests: stdin to the connection, the connection to stdout, until both end.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace
{

constexpr int kAfSmc = 43;       // AF_SMC
constexpr int kSmcProtoIpv4 = 0; // SMCPROTO_SMC

int usage()
{
    std::fprintf(stderr, "usage: kernel-smc-nc [-c N] [--close-second] [-l] HOST PORT\n"
                         "Copies stdin to an AF_SMC connection and the connection to stdout\n"
                         "until both end; -l listens on HOST:PORT. -c: N connections one\n"
                         "after another (default 1); stdin goes to the first.\n"
                         "--close-second: end our side only after the peer ended its own.\n");
    return 2;
}

int fail(const char* what)
{
    std::fprintf(stderr, "kernel-smc-nc: %s: %s\n", what, std::strerror(errno));
    return 1;
}

bool writeAll(int fd, const char* p, std::size_t n)
{
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

// Until both directions ended: stdin to the socket (then SHUT_WR; with `closeSecond` only
// once the peer ended its side), the socket to stdout.
int pump(int s, bool closeSecond)
{
    static char buf[256 * 1024];
    bool inEof = false, netEof = false;
    while (!inEof || !netEof) {
        pollfd fds[2] = {{STDIN_FILENO, static_cast<short>(inEof ? 0 : POLLIN), 0},
                         {s, static_cast<short>(netEof ? 0 : POLLIN), 0}};
        if (::poll(fds, 2, -1) < 0 && errno != EINTR)
            return fail("poll");
        if (!inEof && fds[0].revents != 0) {
            const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
            if (n > 0) {
                if (!writeAll(s, buf, static_cast<std::size_t>(n)))
                    return fail("send");
            } else {
                inEof = true;
                if (!closeSecond || netEof)
                    ::shutdown(s, SHUT_WR);
            }
        }
        if (!netEof && fds[1].revents != 0) {
            const ssize_t n = ::read(s, buf, sizeof buf);
            if (n < 0 && errno != EINTR)
                return fail("recv");
            if (n == 0) {
                netEof = true;
                if (closeSecond && inEof)
                    ::shutdown(s, SHUT_WR);
            } else if (n > 0 && !writeAll(STDOUT_FILENO, buf, static_cast<std::size_t>(n)))
                return fail("stdout");
        }
    }
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    int i = 1;
    long count = 1;
    bool closeSecond = false;
    for (; argc > i; ++i) {
        if (std::string_view(argv[i]) == "-c" && argc > i + 1)
            count = std::atol(argv[++i]);
        else if (std::string_view(argv[i]) == "--close-second")
            closeSecond = true;
        else
            break;
    }
    const bool listen = argc > i && std::string_view(argv[i]) == "-l";
    i += listen ? 1 : 0;
    if (argc - i != 2 || argv[i][0] == '-' || count < 1)
        return usage();
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[i + 1])));
    if (::inet_pton(AF_INET, argv[i], &addr.sin_addr) != 1)
        return usage();
    const sockaddr* sa = reinterpret_cast<const sockaddr*>(&addr);
    int l = -1;
    if (listen) {
        l = ::socket(kAfSmc, SOCK_STREAM | SOCK_CLOEXEC, kSmcProtoIpv4);
        if (l < 0)
            return fail("socket(AF_SMC) (modprobe smc)");
        const int on = 1;
        ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        if (::bind(l, sa, sizeof addr) < 0 || ::listen(l, 8) < 0)
            return fail("listen");
        std::fprintf(stderr, "kernel-smc-nc: listening\n");
    }
    // One connection after another; stdin is at its end for all but the first.
    for (long k = 0; k < count; ++k) {
        int s = listen ? ::accept(l, nullptr, nullptr)
                       : ::socket(kAfSmc, SOCK_STREAM | SOCK_CLOEXEC, kSmcProtoIpv4);
        if (s < 0)
            return fail(listen ? "accept" : "socket(AF_SMC) (modprobe smc)");
        if (!listen && ::connect(s, sa, sizeof addr) < 0)
            return fail("connect");
        const int rc = pump(s, closeSecond);
        ::close(s);
        if (rc != 0)
            return rc;
    }
    return 0;
}
