// SPDX-License-Identifier: MIT
// An application of the installed library: two processes, one SMC-D connection, 1 MiB each way.
//
// Build against an installed smc-core with nothing but pkg-config:
//   c++ -std=c++20 smcd_pair.cpp $(pkg-config --cflags --libs smc-core) -o smcd-pair
// Exit status 0 when both directions carried their bytes intact over SMC-D.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "smc/socket/socket.h"

namespace
{

constexpr std::size_t kBytes = 1 << 20;
constexpr std::chrono::milliseconds kTimeout{20'000};

// What side `seed` sends: easy to check, different each way.
std::vector<std::byte> pattern(std::uint8_t seed)
{
    std::vector<std::byte> bytes(kBytes);
    for (std::size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = static_cast<std::byte>((i * 131 + seed) >> 3);
    return bytes;
}

// Says what failed; returns the exit status for it.
int fail(const char* side, const char* what, std::error_code error = {})
{
    std::fprintf(stderr, "smcd-pair %s: %s%s%s\n", side, what, error ? ": " : "",
                 error ? error.message().c_str() : "");
    return 1;
}

// Sends our pattern while it receives the peer's (one sender and one receiver may run at
// once), then compares. Returns the exit status.
int exchange(smc::Socket& conn, const char* side, std::uint8_t ours, std::uint8_t theirs)
{
    if (conn.transport() != smc::Transport::SmcD)
        return fail(side, "the connection is not SMC-D");
    const std::vector<std::byte> out = pattern(ours);
    std::error_code sendError;
    std::thread sender([&] {
        for (std::size_t done = 0; done < out.size();) {
            smc::Result<std::size_t> n = conn.send(std::span(out).subspan(done));
            if (!n) {
                sendError = n.error();
                return;
            }
            done += *n;
        }
    });
    std::vector<std::byte> in(kBytes);
    std::size_t got = 0;
    smc::Result<std::size_t> n = 0;
    while (got < in.size() && (n = conn.recv(std::span(in).subspan(got))) && *n > 0)
        got += *n;
    sender.join();
    if (sendError)
        return fail(side, "send", sendError);
    if (!n)
        return fail(side, "recv", n.error());
    if (got < in.size())
        return fail(side, "the stream ended early");
    if (in != pattern(theirs))
        return fail(side, "the bytes received differ from the bytes sent");
    conn.close();
    return 0;
}

smc::SocketOptions options()
{
    smc::SocketOptions o;
    o.mode = smc::Mode::SmcD;
    o.sendTimeout = kTimeout;
    o.recvTimeout = kTimeout;
    return o;
}

// The child: connects to the port the parent writes into `portPipe`.
int client(int portPipe)
{
    std::uint16_t port = 0;
    if (read(portPipe, &port, sizeof port) != sizeof port)
        return fail("client", "the server did not start");
    auto stack = smc::SmcStack::create();
    if (!stack)
        return fail("client", "SmcStack::create", stack.error());
    smc::Result<smc::Socket> conn = smc::Socket::connect(**stack, "127.0.0.1", port, options());
    if (!conn)
        return fail("client", "connect", conn.error());
    return exchange(*conn, "client", 1, 2);
}

int server(int portPipe, pid_t child)
{
    auto stack = smc::SmcStack::create();
    if (!stack)
        return fail("server", "SmcStack::create", stack.error());
    smc::Result<smc::Listener> listener = smc::Listener::listen(**stack, "127.0.0.1", 0, options());
    if (!listener)
        return fail("server", "listen", listener.error());
    const std::uint16_t port = listener->port();
    if (write(portPipe, &port, sizeof port) != sizeof port)
        return fail("server", "the port could not be passed on");
    close(portPipe);
    smc::Result<smc::Socket> conn = listener->accept(kTimeout);
    int result = conn ? exchange(*conn, "server", 2, 1) : fail("server", "accept", conn.error());
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        result = fail("server", "the client failed");
    if (result == 0)
        std::printf("smcd-pair: %zu bytes each way over SMC-D between two processes, intact\n",
                    kBytes);
    return result;
}

} // namespace

int main()
{
    // Fork before either side makes a stack: a stack's threads do not survive fork().
    int fds[2];
    if (pipe(fds) != 0)
        return fail("server", "pipe", std::error_code(errno, std::generic_category()));
    const pid_t child = fork();
    if (child < 0)
        return fail("server", "fork", std::error_code(errno, std::generic_category()));
    if (child == 0) {
        close(fds[1]);
        return client(fds[0]);
    }
    close(fds[0]);
    return server(fds[1], child);
}
