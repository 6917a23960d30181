// SPDX-License-Identifier: MIT
// Sockets in one process: SMC-D over the cross-process device, fallbacks, close, readiness.
#include "smc/socket/internal/make_stack.h"
#include "smc/socket/socket.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "smc/ism/shm_ism.h"
#include "smc/net/clc_io.h"
#include "smc/net/tcp.h"
#include "smc/socket/internal/socket_impl.h"
#include "tests/libtest/socket_stream.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

std::unique_ptr<SmcStack> makeStack(StackConfig config = {})
{
    return std::move(SmcStack::create(config)).value();
}

std::vector<std::byte> pattern(std::size_t n, unsigned seed)
{
    std::vector<std::byte> v(n);
    std::mt19937 rng(seed);
    for (auto& b : v)
        b = static_cast<std::byte>(rng());
    return v;
}

Result<void> sendAll(Socket& s, std::span<const std::byte> data)
{
    while (!data.empty()) {
        Result<std::size_t> n = s.send(data);
        if (!n)
            return n.error();
        data = data.subspan(*n);
    }
    return {};
}

// Reads until EOF (or an error, returned).
Result<std::vector<std::byte>> recvAll(Socket& s)
{
    std::vector<std::byte> got;
    std::array<std::byte, 70000> chunk;
    for (;;) {
        Result<std::size_t> n = s.recv(chunk);
        if (!n)
            return n.error();
        if (*n == 0)
            return got;
        got.insert(got.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(*n));
    }
}

using Pair = test::SocketPair;
using test::connectPair;

// Both ways at once, more than the rings hold, in odd pieces: nothing lost or reordered.
void exchange(Pair& p, std::size_t bytes)
{
    const auto a = pattern(bytes, 1);
    const auto b = pattern(bytes, 2);
    std::thread clientSend([&] {
        EXPECT_TRUE(sendAll(p.client, a));
        EXPECT_TRUE(p.client.shutdown(Shutdown::Write));
    });
    std::thread serverSend([&] {
        EXPECT_TRUE(sendAll(p.server, b));
        EXPECT_TRUE(p.server.shutdown(Shutdown::Write));
    });
    Result<std::vector<std::byte>> atServer = std::vector<std::byte>{};
    std::thread serverRecv([&] { atServer = recvAll(p.server); });
    Result<std::vector<std::byte>> atClient = recvAll(p.client);
    serverRecv.join();
    clientSend.join();
    serverSend.join();
    ASSERT_TRUE(atClient);
    ASSERT_TRUE(atServer);
    EXPECT_TRUE(*atServer == a);
    EXPECT_TRUE(*atClient == b);
}

// A client connection to `l` from `stack` as the socket layer holds it (its SocketImpl).
std::shared_ptr<SocketImpl> clientImpl(SmcStack& stack, const Listener& l)
{
    auto to = net::resolve("127.0.0.1", l.port(), false).value();
    UniqueFd tcp = std::move(net::connectTcp(to, net::deadlineAfter(10s))).value();
    return std::move(establish(coreOf(stack), std::move(tcp), false, SocketOptions{})).value();
}

TEST(Socket, SmcdBothWaysThroughTheRings)
{
    auto server = makeStack();
    auto client = makeStack();
    Pair p = connectPair(*server, *client);
    ASSERT_EQ(p.client.transport(), Transport::SmcD);
    ASSERT_EQ(p.server.transport(), Transport::SmcD);
    EXPECT_EQ(p.client.fallbackReason(), std::nullopt);
    exchange(p, 3 * 1024 * 1024 + 17);
    EXPECT_EQ(client->stats().smcdClient, 1u);
    EXPECT_EQ(server->stats().smcdServer, 1u);
    p.client.close();
    p.server.close();
    // Each side's RMB stays granted to the other process (kept), and nothing else is held.
    EXPECT_GT(server->stats().keptRmbBytes, 0u);
    EXPECT_EQ(server->poolStats().rmb.inUseBytes, server->stats().keptRmbBytes);
    EXPECT_EQ(client->poolStats().rmb.inUseBytes, client->stats().keptRmbBytes);
}

// Sockets on this host in TIME_WAIT with `port` at either end (/proc/net/tcp, IPv4).
int timeWaits(std::uint16_t port)
{
    std::FILE* f = std::fopen("/proc/net/tcp", "r");
    if (f == nullptr)
        return -1;
    int n = 0;
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
        unsigned local = 0, remote = 0, state = 0;
        if (std::sscanf(line, " %*u: %*8x:%4x %*8x:%4x %2x", &local, &remote, &state) == 3 &&
            state == 6 && (local == port || remote == port))
            ++n;
    }
    std::fclose(f);
    return n;
}

// The server closes first (an HTTP server with Connection: close), then the client: the TCP
// connection under SMC, which carried none of the stream, ends with no TIME_WAIT at either
// end (a FIN crossing the server's would leave it at both, and thousands of them slow every
// later connect). Over plain TCP the server's end waits, as always.
TEST(Socket, BothEndsClosedLeaveNoTimeWaitUnderSmc)
{
    auto server = makeStack();
    auto client = makeStack();
    for (Mode mode : {Mode::SmcD, Mode::Tcp}) { // TCP last: it leaves TIME_WAIT on its port
        SocketOptions o;
        o.mode = mode;
        Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0, o)).value();
        Socket c = std::move(Socket::connect(*client, "127.0.0.1", l.port(), o)).value();
        Socket s = std::move(l.accept(10s)).value();
        ASSERT_EQ(c.transport(), mode == Mode::Tcp ? Transport::Tcp : Transport::SmcD);
        const auto bye = pattern(100, 3);
        ASSERT_TRUE(sendAll(s, bye));
        s.close();
        Result<std::vector<std::byte>> got = recvAll(c);
        ASSERT_TRUE(got) << got.error().message();
        EXPECT_EQ(*got, bye);
        c.close();
        std::this_thread::sleep_for(50ms); // the last segments between the two ends
        if (mode == Mode::Tcp)
            EXPECT_GE(timeWaits(l.port()), 1) << "TCP's active closer waits";
        else
            EXPECT_EQ(timeWaits(l.port()), 0);
    }
}

// The next connection between the same two processes maps nothing: each side takes the RMB
// the other still has mapped, once the other closed its end; a third process gets none of it.
TEST(Socket, TheNextConnectionToAProcessReusesWhatItMapped)
{
    auto server = makeStack();
    auto client = makeStack();
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0)).value();
    auto connect = [&](SmcStack& from) {
        Pair p;
        p.client = std::move(Socket::connect(from, "127.0.0.1", l.port())).value();
        p.server = std::move(l.accept(10s)).value();
        EXPECT_EQ(p.server.transport(), Transport::SmcD);
        return p;
    };
    {
        Pair first = connect(*client);
        exchange(first, 300'000);
    }
    const std::uint64_t attachesServed = coreOf(*server).device().stats().attachesServed;
    {
        Pair second = connect(*client);
        EXPECT_EQ(server->stats().rmbsReused, 1u);
        EXPECT_EQ(client->stats().rmbsReused, 1u);
        EXPECT_EQ(coreOf(*client).device().stats().attachesKept, 1u);
        EXPECT_EQ(coreOf(*server).device().stats().attachesKept, 1u);
        EXPECT_EQ(coreOf(*server).device().stats().attachesServed, attachesServed); // no round trip
        exchange(second, 1'000'000); // a fresh stream in the old rings
    }
    // Another process (stack) is another peer: fresh buffers, attached the usual way.
    auto stranger = makeStack();
    {
        Pair third = connect(*stranger);
        EXPECT_EQ(server->stats().rmbsReused, 1u);
        EXPECT_EQ(coreOf(*stranger).device().stats().attachesKept, 0u);
        EXPECT_GT(coreOf(*server).device().stats().attachesServed, attachesServed);
        exchange(third, 100'000);
    }
    // A peer that has not closed its end yet may still write: its RMB is not taken again.
    Pair open = connect(*client);
    const std::array<std::byte, 3> hi{std::byte{'h'}, std::byte{'i'}, std::byte{'!'}};
    ASSERT_TRUE(sendAll(open.server, hi));
    std::array<std::byte, 3> got{};
    ASSERT_EQ(open.client.recv(got).value(), 3u);
    open.client.close(); // the server's end stays open
    const std::uint64_t reused = client->stats().rmbsReused;
    Pair next = connect(*client);
    EXPECT_EQ(client->stats().rmbsReused, reused) << "the server's end of the last one is open";
    exchange(next, 100'000);
}

// Kept RMBs are idle memory: a pool at its limit takes them back rather than refuse another
// peer SMC-D.
TEST(Socket, KeptRmbsGiveWayToAnotherPeerAtThePoolsLimit)
{
    SocketOptions options;
    StackConfig c;
    c.poolMemoryLimit = options.rmbBytes; // one RMB
    auto server = makeStack(c);
    auto first = makeStack();
    auto second = makeStack();
    {
        Pair p = connectPair(*server, *first);
        exchange(p, 10'000);
    }
    ASSERT_EQ(server->stats().keptRmbBytes, options.rmbBytes);
    Pair p = connectPair(*server, *second);
    EXPECT_EQ(p.server.transport(), Transport::SmcD);
    EXPECT_EQ(server->stats().keptRmbBytes, 0u);
    exchange(p, 10'000);
}

TEST(Socket, OneStackCanBeBothEnds)
{
    auto stack = makeStack();
    Pair p = connectPair(*stack, *stack);
    ASSERT_EQ(p.client.transport(), Transport::SmcD);
    exchange(p, 200'000);
    EXPECT_EQ(stack->connections().size(), 2u);
}

TEST(Socket, ForcedTcpOnBothEndsIsPlainTcp)
{
    auto stack = makeStack();
    SocketOptions tcp;
    tcp.mode = Mode::Tcp;
    Pair p = connectPair(*stack, *stack, tcp, tcp);
    EXPECT_EQ(p.client.transport(), Transport::Tcp);
    EXPECT_EQ(p.client.fallbackReason(), std::nullopt);
    exchange(p, 1'000'000);
    EXPECT_EQ(stack->stats().tcpForced, 2u);
}

TEST(Socket, APeerWithoutClcFallsBackWithItsBytesIntact)
{
    auto stack = makeStack();
    SocketOptions tcp;
    tcp.mode = Mode::Tcp; // the client sends application bytes first: not CLC
    Listener l = std::move(Listener::listen(*stack, "127.0.0.1", 0)).value();
    Socket c = std::move(Socket::connect(*stack, "127.0.0.1", l.port(), tcp)).value();
    const auto hello = pattern(1000, 3);
    ASSERT_TRUE(sendAll(c, hello));
    Socket s = std::move(l.accept(10s)).value();
    EXPECT_EQ(s.transport(), Transport::Tcp);
    EXPECT_EQ(s.fallbackReason(), clc::DeclineCode::PeerNoSmc);
    std::vector<std::byte> got(hello.size());
    std::size_t have = 0;
    while (have < got.size())
        have += s.recv(std::span(got).subspan(have)).value();
    EXPECT_TRUE(got == hello);
    EXPECT_EQ(stack->stats().serverFallbacks.at(clc::DeclineCode::PeerNoSmc), 1u);
}

TEST(Socket, NoCommonEidIsADeclineAndBothFallBack)
{
    StackConfig other;
    other.ueid = "ANOTHER-EID";
    auto server = makeStack(other);
    auto client = makeStack();
    Pair p = connectPair(*server, *client);
    EXPECT_EQ(p.client.transport(), Transport::Tcp);
    EXPECT_EQ(p.server.transport(), Transport::Tcp);
    EXPECT_EQ(p.client.fallbackReason(), clc::DeclineCode::NoUeid); // the server's diagnosis
    EXPECT_EQ(p.server.fallbackReason(), clc::DeclineCode::NoUeid);
    exchange(p, 500'000);
    EXPECT_EQ(server->stats().serverFallbacks.at(clc::DeclineCode::NoUeid), 1u);
    EXPECT_EQ(client->stats().clientFallbacks.at(clc::DeclineCode::NoUeid), 1u);
    EXPECT_EQ(server->poolStats().rmb.inUseBytes, 0);
}

TEST(Socket, NoRoomForAnRmbIsADeclineMem)
{
    StackConfig tiny;
    tiny.poolMemoryLimit = 16 * 1024; // one DMB of the smallest class
    auto server = makeStack(tiny);
    auto client = makeStack();
    SocketOptions big;
    big.rmbBytes = 1 << 20;
    // Server: its one 16 KiB DMB fits; a second connection's does not.
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0, big)).value();
    Socket c1 = std::move(Socket::connect(*client, "127.0.0.1", l.port())).value();
    Socket s1 = std::move(l.accept(10s)).value();
    EXPECT_EQ(s1.transport(), Transport::SmcD);
    Socket c2 = std::move(Socket::connect(*client, "127.0.0.1", l.port())).value();
    Socket s2 = std::move(l.accept(10s)).value();
    EXPECT_EQ(s2.transport(), Transport::Tcp);
    EXPECT_EQ(s2.fallbackReason(), clc::DeclineCode::Mem);
    EXPECT_EQ(c2.fallbackReason(), clc::DeclineCode::Mem);
}

// A header whose length claims more than ever comes holds up only its own connection: the
// listener's steps on the epoll thread never wait for a peer (the next client's handshake,
// with a CLC timeout shorter than the listener's, would time out behind it).
TEST(Socket, AStrangersShortMessageHoldsUpNoOtherHandshake)
{
    auto server = makeStack();
    auto client = makeStack();
    SocketOptions slow;
    slow.clcTimeout = 5s;
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0, slow)).value();
    auto to = net::resolve("127.0.0.1", l.port(), false).value();
    UniqueFd stranger = std::move(net::connectTcp(to, net::deadlineAfter(5s))).value();
    // A PROPOSAL header (v2) that claims 0xfff0 bytes; none follow.
    const std::array<std::byte, 8> head = {std::byte{0xe2}, std::byte{0xd4}, std::byte{0xc3},
                                           std::byte{0xd9}, std::byte{0x01}, std::byte{0xff},
                                           std::byte{0xf0}, std::byte{0x20}};
    ASSERT_TRUE(net::writeAll(stranger.get(), head, net::deadlineAfter(5s)));
    std::this_thread::sleep_for(50ms); // its header is in before the next client comes
    SocketOptions quick;
    quick.clcTimeout = 2s;
    for (int i = 0; i < 3; ++i) {
        Result<Socket> c = Socket::connect(*client, "127.0.0.1", l.port(), quick);
        ASSERT_TRUE(c) << c.error().message();
        EXPECT_EQ(c->transport(), Transport::SmcD);
        Socket s = std::move(l.accept(10s)).value();
        EXPECT_EQ(s.transport(), Transport::SmcD);
    }
}

TEST(Socket, MalformedClcGetsADeclineAndLeaksNothing)
{
    auto stack = makeStack();
    Listener l = std::move(Listener::listen(*stack, "127.0.0.1", 0)).value();
    auto to = net::resolve("127.0.0.1", l.port(), false).value();
    UniqueFd raw = std::move(net::connectTcp(to, net::deadlineAfter(5s))).value();
    // A PROPOSAL header whose length does not fit its layout (v2, SMC-D, 20 bytes).
    std::vector<std::byte> bad = {std::byte{0xe2}, std::byte{0xd4}, std::byte{0xc3},
                                  std::byte{0xd9}, std::byte{0x01}, std::byte{0x00},
                                  std::byte{0x14}, std::byte{0x26}};
    bad.resize(20);
    ASSERT_TRUE(net::writeAll(raw.get(), bad, net::deadlineAfter(5s)));
    Result<clc::Message> answer = net::readClc(raw.get(), net::deadlineAfter(10s));
    ASSERT_TRUE(answer) << answer.error().message();
    ASSERT_TRUE(std::holds_alternative<clc::Decline>(*answer));
    Socket s = std::move(l.accept(10s)).value();
    EXPECT_EQ(s.transport(), Transport::Tcp);
    EXPECT_EQ(stack->poolStats().rmb.inUseBytes, 0);
    // And the stream goes on as TCP.
    const char ping[] = "ping";
    ASSERT_EQ(::send(raw.get(), ping, 4, MSG_NOSIGNAL), 4);
    std::array<std::byte, 4> got{};
    std::size_t have = 0;
    while (have < 4)
        have += s.recv(std::span(got).subspan(have)).value();
    EXPECT_EQ(std::memcmp(got.data(), ping, 4), 0);
}

// A burst leaves the SMC-D pools with free buffers, each a memfd mapping and three fds; the
// stack trims them once they sit idle (poolTrimInterval), and the next connection still
// comes up.
TEST(Socket, ThePoolGivesBackWhatABurstLeft)
{
    StackConfig c;
    c.poolTrimInterval = 100ms;
    c.poolKeepFreeBytes = 0;
    auto server = makeStack(c);
    auto client = makeStack(c);
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0)).value();
    {
        std::vector<Socket> ends;
        for (int i = 0; i < 16; ++i) {
            ends.push_back(std::move(Socket::connect(*client, "127.0.0.1", l.port())).value());
            ends.push_back(std::move(l.accept(10s)).value());
            ASSERT_EQ(ends.back().transport(), Transport::SmcD);
        }
        EXPECT_GE(coreOf(*server).device().stats().dmbs, 16u);
        EXPECT_EQ(coreOf(*server).device().stats().remoteDmbs, 16u);
    }
    auto drained = [](SmcStack& s) {
        const ShmIsmStats d = coreOf(s).device().stats();
        return d.dmbs == 0 && d.remoteDmbs == 0;
    };
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!(drained(*server) && drained(*client)) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
    EXPECT_EQ(coreOf(*server).device().stats().dmbs, 0u);
    EXPECT_EQ(coreOf(*client).device().stats().dmbs, 0u);
    EXPECT_EQ(coreOf(*server).device().stats().remoteDmbs, 0u);
    EXPECT_GT(server->poolStats().rmb.reclaimed, 0u);
    Result<Socket> again = Socket::connect(*client, "127.0.0.1", l.port());
    ASSERT_TRUE(again) << again.error().message();
    Socket accepted = std::move(l.accept(10s)).value();
    EXPECT_EQ(accepted.transport(), Transport::SmcD);
}

TEST(Socket, ClientTimesOutOnASilentServer)
{
    auto stack = makeStack();
    auto at = net::resolve("127.0.0.1", 0, true).value();
    UniqueFd silent = std::move(net::listenTcp(at, 4)).value();
    const std::uint16_t port = net::localAddress(silent.get()).value().port();
    SocketOptions quick;
    quick.clcTimeout = 200ms;
    Result<Socket> c = Socket::connect(*stack, "127.0.0.1", port, quick);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), std::errc::timed_out);
    EXPECT_EQ(stack->stats().handshakeErrors, 1u);
    EXPECT_EQ(stack->poolStats().rmb.inUseBytes, 0);
}

TEST(Socket, ShutdownWriteIsEofAndCloseWithUnreadDataIsAReset)
{
    auto stack = makeStack();
    Pair p = connectPair(*stack, *stack);
    ASSERT_EQ(p.client.transport(), Transport::SmcD);
    const auto data = pattern(1000, 4);
    ASSERT_TRUE(sendAll(p.client, data));
    ASSERT_TRUE(p.client.shutdown(Shutdown::Write));
    EXPECT_EQ(p.client.send(data).error(), std::errc::broken_pipe);
    Result<std::vector<std::byte>> got = recvAll(p.server);
    ASSERT_TRUE(got);
    EXPECT_TRUE(*got == data);

    // The server leaves bytes unread and closes: the client learns it was not orderly.
    Pair q = connectPair(*stack, *stack);
    ASSERT_TRUE(sendAll(q.client, data));
    std::this_thread::sleep_for(10ms);
    q.server.close();
    std::array<std::byte, 16> b{};
    Result<std::size_t> r = q.client.recv(b);
    while (r && *r > 0)
        r = q.client.recv(b);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    EXPECT_EQ(q.server.recv(b).error(), std::errc::not_connected); // a handle after close
}

TEST(Socket, PollableFdIsReadableAndWritableLikeASocket)
{
    auto stack = makeStack();
    Pair p = connectPair(*stack, *stack);
    ASSERT_EQ(p.server.transport(), Transport::SmcD);
    p.server.setNonBlocking(true);
    p.client.setNonBlocking(true);
    pollfd in{p.server.pollFd().value(), POLLIN, 0};
    ASSERT_GE(in.fd, 0);
    EXPECT_EQ(::poll(&in, 1, 0), 0) << "nothing to read yet";
    std::array<std::byte, 64> buf{};
    EXPECT_EQ(p.server.recv(buf).error(), std::errc::resource_unavailable_try_again);
    ASSERT_EQ(p.client.send(pattern(64, 5)).value(), 64u);
    EXPECT_EQ(::poll(&in, 1, 5000), 1);
    EXPECT_EQ(p.server.recv(buf).value(), 64u);
    EXPECT_EQ(::poll(&in, 1, 0), 0) << "read empty again";

    // Fill the server's ring from the client: the client's fd stops being writable.
    pollfd out{p.client.pollFd().value(), POLLOUT, 0};
    EXPECT_EQ(::poll(&out, 1, 0), 1);
    const auto chunk = pattern(4096, 6);
    while (p.client.send(chunk))
        ;
    EXPECT_EQ(::poll(&out, 1, 0), 0) << "ring full";
    std::array<std::byte, 65536> sink{};
    while (p.server.recv(sink))
        ;
    EXPECT_EQ(::poll(&out, 1, 5000), 1) << "room again once the server read";
}

// As a TCP socket: every arrival is an edge, even while bytes are still unread (a poller that
// believed it had read everything waits for the next one); what a recv would take now is what
// unread() says; a peek leaves the bytes to be read again.
TEST(Socket, EdgesUnreadAndPeekAsATcpSocket)
{
    auto stack = makeStack();
    Listener l = std::move(Listener::listen(*stack, "127.0.0.1", 0)).value();
    std::shared_ptr<SocketImpl> c = clientImpl(*stack, l);
    Socket peer = std::move(l.accept(10s)).value();
    ASSERT_EQ(c->transport(), Transport::SmcD);
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(ep, 0);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ASSERT_EQ(::epoll_ctl(ep, EPOLL_CTL_ADD, c->pollFd().value(), &ev), 0);
    epoll_event got{};
    ASSERT_EQ(peer.send(pattern(10, 1)).value(), 10u);
    EXPECT_EQ(::epoll_wait(ep, &got, 1, 5000), 1);
    EXPECT_EQ(::epoll_wait(ep, &got, 1, 0), 0) << "one edge per arrival";
    ASSERT_EQ(peer.send(pattern(20, 2)).value(), 20u);
    EXPECT_EQ(::epoll_wait(ep, &got, 1, 5000), 1) << "the second arrival, nothing read between";
    EXPECT_EQ(c->unread().value(), 30u);
    std::array<std::byte, 64> peeked{};
    EXPECT_EQ(c->peek(std::span(peeked).first(4)).value(), 4u);
    EXPECT_EQ(c->unread().value(), 30u);
    std::array<std::byte, 64> buf{};
    EXPECT_EQ(c->recv(buf).value(), 30u);
    EXPECT_EQ(std::memcmp(buf.data(), peeked.data(), 4), 0);
    EXPECT_EQ(std::memcmp(buf.data(), pattern(10, 1).data(), 10), 0);
    EXPECT_EQ(c->unread().value(), 0u);
    ::close(ep);
    c->close();
}

// A Socket without a connection says so: no transport, no descriptor, not_connected.
TEST(Socket, AnEmptyOrClosedSocketHasNoTransportAndNoDescriptor)
{
    Socket empty;
    EXPECT_EQ(empty.transport(), Transport::None);
    EXPECT_FALSE(empty.connected());
    EXPECT_EQ(empty.pollFd().error(), std::errc::not_connected);

    auto stack = makeStack();
    Pair p = connectPair(*stack, *stack);
    Socket moved = std::move(p.client);
    EXPECT_EQ(p.client.transport(), Transport::None); // what was moved from is empty
    EXPECT_EQ(moved.transport(), Transport::SmcD);
    ASSERT_TRUE(moved.pollFd());
    moved.close();
    EXPECT_EQ(moved.pollFd().error(), std::errc::not_connected);
}

// smcss may look at a connection (another thread, StackCore::connections) while it closes:
// what it shows of the DMBs must not come from the DMBs close() gave back.
TEST(Socket, SmcssMayListAConnectionWhileItCloses)
{
    auto server = makeStack();
    auto client = makeStack();
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> seen{0};
    std::thread lister([&] {
        while (!done)
            for (const ConnectionInfo& i : client->connections()) {
                EXPECT_GT(i.rmbBytes, 0u);
                ++seen;
            }
    });
    for (int round = 0; round < 300; ++round) {
        Pair p = connectPair(*server, *client);
        ASSERT_EQ(p.client.transport(), Transport::SmcD);
        p.client.close();
    }
    done = true;
    lister.join();
    EXPECT_GT(seen.load(), 0u); // it did look while connections were there

    // The same, without the race: the connection as the stack's list holds it, closed first.
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0)).value();
    std::shared_ptr<SocketImpl> c = clientImpl(*client, l);
    Socket accepted = std::move(l.accept(10s)).value();
    ASSERT_EQ(c->transport(), Transport::SmcD);
    c->close();
    const ConnectionInfo after = c->info();
    EXPECT_EQ(after.state, "CLOSED");
    EXPECT_GT(after.rmbBytes, 0u);
    EXPECT_EQ(c->pollFd().error(), std::errc::not_connected);
}

} // namespace
} // namespace smc
