// SPDX-License-Identifier: MIT
// Admission apart from handshakes (seed 003): the handshake limit's fallback to TCP, the old
// shared queue's starvation, and the declined PROPOSAL kept out of the application's bytes.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "smc/clc/clc_messages.h"
#include "smc/handshake/handshake.h"
#include "smc/net/clc_io.h"
#include "smc/net/tcp.h"
#include "smc/socket/socket.h"
#include "tests/libtest/smcr_stacks.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

std::unique_ptr<SmcStack> stackWithPool(unsigned threads)
{
    StackConfig config;
    config.handshakeThreads = threads;
    return std::move(SmcStack::create(config)).value();
}

// A TCP client that connects and says nothing: its handshake holds a pool thread for the
// server's clcTimeout.
UniqueFd silentClient(std::uint16_t port)
{
    auto to = net::resolve("127.0.0.1", port, false).value();
    return std::move(net::connectTcp(to, net::deadlineAfter(5s))).value();
}

// The same from `host`, another loopback address than the listener's clients use.
UniqueFd silentClientFrom(const char* host, std::uint16_t port)
{
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in self{};
    self.sin_family = AF_INET;
    EXPECT_EQ(::inet_pton(AF_INET, host, &self.sin_addr), 1);
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&self), sizeof self), 0);
    sockaddr_in to = self;
    to.sin_port = htons(port);
    EXPECT_EQ(::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr), 1);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to), 0);
    return fd;
}

void roundTrip(Socket& a, Socket& b)
{
    const std::array<std::byte, 3> hello{std::byte{1}, std::byte{2}, std::byte{3}};
    ASSERT_EQ(a.send(hello).value(), 3u);
    std::array<std::byte, 16> got{};
    ASSERT_EQ(b.recv(got).value(), 3u); // the PROPOSAL before them is not the application's
    EXPECT_TRUE(std::equal(hello.begin(), hello.end(), got.begin()));
    ASSERT_EQ(b.send(hello).value(), 3u);
    ASSERT_EQ(a.recv(got).value(), 3u);
}

std::size_t openFds()
{
    return static_cast<std::size_t>(
        std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                      std::filesystem::directory_iterator{}));
}

// Mappings of shared-memory files (DMBs, ours and peers').
std::size_t memfdMappings()
{
    std::ifstream maps("/proc/self/maps");
    std::size_t n = 0;
    for (std::string line; std::getline(maps, line);)
        n += line.find("/memfd:") != std::string::npos;
    return n;
}

// Clients that connect and close before the server accepts: the listener holds at most its
// backlog of connections, drops the ones that are over, and hands out the live one after.
TEST(Listener, UnacceptedConnectionsAreBoundedAndTheAbandonedDropped)
{
    auto server = stackWithPool(2);
    auto client = stackWithPool(2);
    SocketOptions o;
    o.clcTimeout = 5s;
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0, o, {.backlog = 4})).value();
    const std::size_t fds = openFds();
    const std::size_t maps = memfdMappings();
    // Opens a connection and closes it once the server has it whole (before, a close makes
    // the server's handshake fail instead).
    auto openAndClose = [&] {
        const std::uint64_t before = server->stats().smcdServer;
        Result<Socket> c = Socket::connect(*client, "127.0.0.1", l.port(), o);
        ASSERT_TRUE(c) << c.error().message();
        ASSERT_EQ(c->transport(), Transport::SmcD);
        ASSERT_TRUE(test::eventually([&] { return server->stats().smcdServer > before; }));
        c->close();
    };
    // What the listener holds (its queue, and the buffers the pools keep for the most
    // connections open at once) has a bound that does not grow with the connections; before,
    // each held connection kept five fds and two mappings: 600 and 240 here.
    for (int i = 0; i < 120; ++i)
        ASSERT_NO_FATAL_FAILURE(openAndClose()) << i;
    EXPECT_TRUE(test::eventually([&] { return openFds() <= fds + 100; }, 5s))
        << openFds() << " fds, " << fds << " before";
    EXPECT_LE(memfdMappings(), maps + 40) << "before: " << maps;
    Socket live = std::move(Socket::connect(*client, "127.0.0.1", l.port(), o)).value();
    Socket accepted = std::move(l.accept(10s)).value();
    ASSERT_NO_FATAL_FAILURE(roundTrip(live, accepted));
}

// Clients that stall hold no handshake thread (the PROPOSAL and the CONFIRM are waited for on
// the epoll thread): with one thread and six of them, three stalled halfway through their
// PROPOSAL and three after it (we ACCEPT, they never CONFIRM), a good client still gets SMC-D
// at once, and each of them ends at the server's CLC timeout.
TEST(Listener, StalledProposalsHoldNoHandshakeThread)
{
    auto server = stackWithPool(1);
    auto client = stackWithPool(1);
    SocketOptions o;
    o.clcTimeout = 2s;
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0, o)).value();
    const std::vector<std::byte> proposal =
        clc::encode(net::smcdProposal(coreOf(*client).device().localGid(), coreOf(*client).ueid()))
            .value();
    std::vector<UniqueFd> stalled;
    for (int i = 0; i < 6; ++i) {
        stalled.push_back(silentClient(l.port()));
        const std::size_t bytes = i < 3 ? proposal.size() / 2 : proposal.size();
        ASSERT_TRUE(net::writeAll(stalled.back().get(), std::span(proposal).first(bytes),
                                  net::deadlineAfter(5s)));
    }
    SocketOptions quick;
    quick.clcTimeout = 1s; // before, the one handshake thread waited 2 s on the first
    Result<Socket> c = Socket::connect(*client, "127.0.0.1", l.port(), quick);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->transport(), Transport::SmcD);
    Result<Socket> s = l.accept(5s);
    ASSERT_TRUE(s) << s.error().message();
    roundTrip(*c, *s);
    EXPECT_TRUE(test::eventually([&] { return server->stats().handshakeErrors == 6; }));
}

// One host's connections waiting for their CLC hold at most half the handshake slots: past
// that, its new connections are declined to TCP at once, and a client from another host still
// gets SMC-D (before, four silent ones took every slot and it got TCP).
TEST(Listener, OneHostHoldsAtMostHalfTheHandshakes)
{
    auto server = stackWithPool(1);
    auto client = stackWithPool(1);
    SocketOptions o;
    o.clcTimeout = 3s;
    Listener l =
        std::move(Listener::listen(*server, "127.0.0.1", 0, o, {.handshakeLimit = 4})).value();
    std::vector<UniqueFd> stalled;
    for (int i = 0; i < 4; ++i)
        stalled.push_back(silentClientFrom("127.0.0.2", l.port()));
    EXPECT_TRUE(test::eventually([&] { return server->stats().handshakesLimited == 2; }));

    Result<Socket> c = Socket::connect(*client, "127.0.0.1", l.port());
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->transport(), Transport::SmcD);
    // Behind the two declined ones, queued as TCP.
    Result<Socket> s = l.accept(5s);
    for (int i = 0; i < 2 && s && s->transport() == Transport::Tcp; ++i)
        s = l.accept(5s);
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(s->transport(), Transport::SmcD);
    roundTrip(*c, *s);
}

// Past the limit a connection is declined at once and accepted as TCP while the handshake
// before it still waits: admission does not wait for handshakes.
TEST(Listener, PastTheHandshakeLimitConnectionsGoTcpAtOnce)
{
    auto server = stackWithPool(1);
    auto client = stackWithPool(1);
    SocketOptions o;
    o.clcTimeout = 3s;
    Listener l =
        std::move(Listener::listen(*server, "127.0.0.1", 0, o, {.handshakeLimit = 1})).value();
    UniqueFd silent = silentClient(l.port());
    std::this_thread::sleep_for(100ms); // its handshake is pending now

    const auto start = std::chrono::steady_clock::now();
    Result<Socket> c = Socket::connect(*client, "127.0.0.1", l.port());
    ASSERT_TRUE(c) << c.error().message();
    Result<Socket> s = l.accept(2s);
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s); // not after the silent one's 3 s
    EXPECT_EQ(c->transport(), Transport::Tcp);
    EXPECT_EQ(c->fallbackReason(), clc::DeclineCode::PeerNoSmc);
    EXPECT_EQ(s->transport(), Transport::Tcp);
    EXPECT_EQ(s->fallbackReason(), clc::DeclineCode::PeerNoSmc);
    roundTrip(*c, *s);
    const StackStats st = server->stats();
    EXPECT_EQ(st.handshakesLimited, 1u);
    EXPECT_EQ(st.serverFallbacks.at(clc::DeclineCode::PeerNoSmc), 1u);

    // Once the silent one's handshake gave up, SMC again.
    silent.reset();
    EXPECT_TRUE(test::eventually([&] {
        Result<Socket> again = Socket::connect(*client, "127.0.0.1", l.port());
        Result<Socket> acc = l.accept(2s);
        return again && acc && again->transport() == Transport::SmcD;
    }));
}

// The old design: the accepting waits on the pool behind a handshake, so a new connection
// is not admitted until that handshake is done.
TEST(Listener, SharedQueueStarvesAcceptBehindAHandshake)
{
    auto server = stackWithPool(1);
    auto client = stackWithPool(1);
    SocketOptions o;
    o.clcTimeout = 1500ms;
    ListenerOptions shared{.handshakeLimit = 1, .sharedAcceptQueue = true}; // no limit there
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0, o, shared)).value();
    UniqueFd silent = silentClient(l.port());
    std::this_thread::sleep_for(100ms); // accepted; its handshake holds the only thread

    Result<Socket> c = std::make_error_code(std::errc::not_connected);
    std::thread connecting([&] { c = Socket::connect(*client, "127.0.0.1", l.port()); });
    EXPECT_EQ(l.accept(700ms).error(), std::errc::timed_out); // starved
    // The silent one's handshake times out (a fallback: it never spoke CLC), and only then
    // is the new connection accepted and its handshake run.
    Result<Socket> first = l.accept(5s);
    ASSERT_TRUE(first) << first.error().message();
    EXPECT_EQ(first->fallbackReason(), clc::DeclineCode::PeerNoSmc);
    Result<Socket> s = l.accept(5s);
    connecting.join();
    ASSERT_TRUE(s) << s.error().message();
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->transport(), Transport::SmcD);
    EXPECT_EQ(server->stats().handshakesLimited, 0u);
    roundTrip(*c, *s);
}

// Closing a shared-queue listener while its accepting waits on the pool behind a handshake:
// close() returns at once, and the accepting that runs later touches nothing of it.
TEST(Listener, SharedQueueClosesWithAcceptingQueued)
{
    auto server = stackWithPool(1);
    SocketOptions o;
    o.clcTimeout = 500ms;
    Listener l =
        std::move(Listener::listen(*server, "127.0.0.1", 0, o, {.sharedAcceptQueue = true}))
            .value();
    UniqueFd silent = silentClient(l.port());
    std::this_thread::sleep_for(100ms);       // its handshake holds the only thread
    UniqueFd second = silentClient(l.port()); // its accepting is queued behind
    std::this_thread::sleep_for(50ms);
    const auto start = std::chrono::steady_clock::now();
    l.close();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 400ms); // not after the handshake
    std::this_thread::sleep_for(700ms); // the handshake ends, the queued accepting runs
    EXPECT_EQ(l.accept(10ms).error(), std::errc::not_connected);
}

// skipClc on its own: a PROPOSAL in pieces, then the application's bytes; and a stream that
// does not start with CLC is left alone.
TEST(Listener, SkipClcTakesTheWholeMessageAndNoMore)
{
    auto pair = test::smcr_stacks::tcpPair();
    clc::Proposal p;
    std::vector<std::byte> wire = clc::encode(clc::Message(p)).value();
    const std::array<std::byte, 2> app{std::byte{0x42}, std::byte{0x43}};
    std::size_t left = net::kClcSizeUnknown;
    ASSERT_EQ(::send(pair.client.get(), wire.data(), 3, 0), 3);
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(net::skipClc(pair.server.get(), left).value()); // header incomplete
    ASSERT_EQ(::send(pair.client.get(), wire.data() + 3, wire.size() - 3, 0),
              static_cast<ssize_t>(wire.size() - 3));
    ASSERT_EQ(::send(pair.client.get(), app.data(), app.size(), 0), 2);
    EXPECT_TRUE(test::eventually([&] { return net::skipClc(pair.server.get(), left).value(); }));
    std::array<std::byte, 8> got{};
    EXPECT_TRUE(test::eventually(
        [&] { return ::recv(pair.server.get(), got.data(), got.size(), MSG_DONTWAIT) == 2; }));
    EXPECT_EQ(got[0], std::byte{0x42});

    left = net::kClcSizeUnknown; // not CLC: nothing taken
    ASSERT_EQ(::send(pair.client.get(), app.data(), app.size(), 0), 2);
    EXPECT_TRUE(test::eventually([&] { return net::skipClc(pair.server.get(), left).value(); }));
    EXPECT_EQ(::recv(pair.server.get(), got.data(), got.size(), MSG_DONTWAIT), 2);
}

} // namespace
} // namespace smc
