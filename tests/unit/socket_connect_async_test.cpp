// SPDX-License-Identifier: MIT
// Socket::connectAsync: returns at once, its descriptor turns readable at the end, calls wait.
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <thread>

#include "smc/net/tcp.h"
#include "smc/socket/socket.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

std::unique_ptr<SmcStack> makeStack()
{
    return std::move(SmcStack::create()).value();
}

// Waits for `fd` to turn readable (the connect is over); false after 10 s.
bool readableWithin(int fd, std::chrono::milliseconds timeout = 10s)
{
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1 && (p.revents & POLLIN);
}

TEST(ConnectAsync, EndsInAnSmcdConnectionThatCarriesBytes)
{
    auto server = makeStack();
    auto client = makeStack();
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0)).value();
    Socket c = std::move(Socket::connectAsync(*client, "127.0.0.1", l.port())).value();
    ASSERT_TRUE(c.connectFd());
    Socket s = std::move(l.accept(10s)).value();
    ASSERT_TRUE(readableWithin(*c.connectFd()));
    ASSERT_TRUE(c.connectResult());
    EXPECT_TRUE(c.connected());
    EXPECT_EQ(c.transport(), Transport::SmcD);
    EXPECT_TRUE(c.pollFd());

    const std::array<std::byte, 5> hello{std::byte{'h'}, std::byte{'e'}, std::byte{'l'},
                                         std::byte{'l'}, std::byte{'o'}};
    ASSERT_EQ(c.send(hello).value(), hello.size());
    std::array<std::byte, 16> got{};
    ASSERT_EQ(s.recv(got).value(), hello.size());
    EXPECT_EQ(std::memcmp(got.data(), hello.data(), hello.size()), 0);
    ASSERT_EQ(s.send(hello).value(), hello.size());
    ASSERT_EQ(c.recv(got).value(), hello.size());
}

TEST(ConnectAsync, ARefusedConnectIsItsResultAndEveryCallsError)
{
    auto client = makeStack();
    // A port nobody listens on: bound, never listening.
    auto at = net::resolve("127.0.0.1", 0, true).value();
    UniqueFd held(::socket(AF_INET, SOCK_STREAM, 0));
    ASSERT_EQ(::bind(held.get(), reinterpret_cast<const sockaddr*>(&at.storage), at.length), 0);
    const std::uint16_t port = net::localAddress(held.get()).value().port();

    Socket c = std::move(Socket::connectAsync(*client, "127.0.0.1", port)).value();
    ASSERT_TRUE(readableWithin(*c.connectFd()));
    EXPECT_EQ(c.connectResult().error(), std::errc::connection_refused);
    std::array<std::byte, 4> buf{};
    EXPECT_EQ(c.send(buf).error(), std::errc::connection_refused);
    EXPECT_EQ(c.recv(buf).error(), std::errc::connection_refused);
    EXPECT_FALSE(c.connected());
    EXPECT_EQ(c.transport(), Transport::None);
    EXPECT_EQ(c.pollFd().error(), std::errc::not_connected);
}

// A server that takes the TCP connection and never answers the PROPOSAL: the connect stays
// under way for the CLC timeout, long enough to see what a socket does meanwhile.
TEST(ConnectAsync, WhileUnderWayCallsWaitOrSayTryAgainAndCloseDoesNotWait)
{
    auto client = makeStack();
    auto at = net::resolve("127.0.0.1", 0, true).value();
    UniqueFd silent = std::move(net::listenTcp(at, 4)).value();
    const std::uint16_t port = net::localAddress(silent.get()).value().port();
    SocketOptions o;
    o.clcTimeout = 1500ms;

    Socket c = std::move(Socket::connectAsync(*client, "127.0.0.1", port, o)).value();
    c.setNonBlocking(true);
    std::array<std::byte, 4> buf{};
    EXPECT_EQ(c.connectResult().error(), std::errc::resource_unavailable_try_again);
    EXPECT_EQ(c.send(buf).error(), std::errc::resource_unavailable_try_again);
    EXPECT_EQ(c.recv(buf).error(), std::errc::resource_unavailable_try_again);
    EXPECT_FALSE(readableWithin(*c.connectFd(), 100ms));
    EXPECT_EQ(c.pollFd().error(), std::errc::not_connected);

    // Blocking, a receive waits for the end: the handshake's timeout.
    c.setNonBlocking(false);
    const auto before = std::chrono::steady_clock::now();
    EXPECT_EQ(c.recv(buf).error(), std::errc::timed_out);
    EXPECT_GE(std::chrono::steady_clock::now() - before, 1s);
    EXPECT_EQ(c.connectResult().error(), std::errc::timed_out);

    // Closing one that is still under way returns at once, and cuts its handshake short: the
    // stack, which waits for its handshake threads, goes well before the CLC timeout.
    auto other = makeStack();
    Socket d = std::move(Socket::connectAsync(*other, "127.0.0.1", port, o)).value();
    std::this_thread::sleep_for(200ms); // into the handshake: the PROPOSAL waits for an answer
    const auto closing = std::chrono::steady_clock::now();
    d.close();
    EXPECT_LT(std::chrono::steady_clock::now() - closing, 500ms);
    EXPECT_EQ(d.connectResult().error(), std::errc::not_connected);
    EXPECT_EQ(d.send(buf).error(), std::errc::not_connected);
    other.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - closing, 1s);
}

} // namespace
} // namespace smc
