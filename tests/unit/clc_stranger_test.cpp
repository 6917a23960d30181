// SPDX-License-Identifier: MIT
// A stranger speaking CLC over TCP: part of a header, then silence or the end. Every wait ends
// by its deadline or at the peer's FIN, asleep: no thread spins on the bytes already queued.
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "smc/clc/clc_messages.h"
#include "smc/handshake/handshake.h"
#include "smc/ism/shm_ism.h"
#include "smc/net/clc_io.h"
#include "smc/net/tcp.h"
#include "smc/socket/internal/make_stack.h"
#include "smc/socket/socket.h"
#include "tests/libtest/link_groups.h"
#include "tests/libtest/liveness.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using test::eventually;
using test::processCpu;
using test::within;

// The first bytes of a CLC message: the eyecatcher, then the type (PROPOSAL).
constexpr std::array<std::byte, 5> kHead = {std::byte{0xe2}, std::byte{0xd4}, std::byte{0xc3},
                                            std::byte{0xd9}, std::byte{0x01}};

std::unique_ptr<SmcStack> makeStack()
{
    return std::move(SmcStack::create()).value();
}

void sendRaw(int fd, std::span<const std::byte> bytes)
{
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
}

// A TCP server that answers a connection with `head` and then, if `fin`, shuts down writing.
// Holds the connection open until destroyed.
class PartialServer
{
public:
    PartialServer(std::span<const std::byte> head, bool fin)
    {
        auto at = net::resolve("127.0.0.1", 0, true).value();
        listener_ = std::move(net::listenTcp(at, 4)).value();
        port_ = net::localAddress(listener_.get()).value().port();
        thread_ = std::thread([this, head, fin] {
            if (net::waitFor(listener_.get(), POLLIN, net::deadlineAfter(10s))) {
                conn_ = UniqueFd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
                (void)!::send(conn_.get(), head.data(), head.size(), MSG_NOSIGNAL);
                if (fin)
                    ::shutdown(conn_.get(), SHUT_WR);
            }
        });
    }
    ~PartialServer() { thread_.join(); }
    std::uint16_t port() const noexcept { return port_; }

private:
    UniqueFd listener_, conn_;
    std::uint16_t port_ = 0;
    std::thread thread_;
};

UniqueFd connectRaw(std::uint16_t port)
{
    auto to = net::resolve("127.0.0.1", port, false).value();
    return std::move(net::connectTcp(to, net::deadlineAfter(5s))).value();
}

TEST(ClcStranger, ClientWaitsOutAPartialAcceptAsleep)
{
    auto stack = makeStack();
    PartialServer server{std::span(kHead).first(3), false};
    SocketOptions o;
    o.clcTimeout = 400ms;
    const auto cpu = processCpu();
    Result<Socket> c =
        within(20s, [&] { return Socket::connect(*stack, "127.0.0.1", server.port(), o); });
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), std::errc::timed_out);
    // Spinning would cost the whole 400 ms.
    EXPECT_LT(processCpu() - cpu, 200ms);
}

TEST(ClcStranger, ClientSeesTheEndAfterAPartialAccept)
{
    auto stack = makeStack();
    for (std::size_t bytes : {3, 7}) {
        std::array<std::byte, 7> head{};
        std::copy(kHead.begin(), kHead.end(), head.begin()); // then a zero length
        PartialServer server{std::span(head).first(bytes), true};
        SocketOptions o;
        o.clcTimeout = 60s; // the end, not the timeout, must end the wait
        Result<Socket> c =
            within(20s, [&] { return Socket::connect(*stack, "127.0.0.1", server.port(), o); });
        ASSERT_FALSE(c) << bytes;
        EXPECT_EQ(c.error(), std::errc::connection_reset) << bytes;
    }
}

TEST(ClcStranger, ServerHandshakeSeesTheEndAfterAPartialProposal)
{
    auto stack = makeStack();
    SocketOptions o;
    o.clcTimeout = 60s;
    Listener l = std::move(Listener::listen(*stack, "127.0.0.1", 0, o)).value();
    for (std::size_t bytes : {3, 6}) {
        const std::uint64_t before = stack->stats().handshakeErrors;
        UniqueFd raw = connectRaw(l.port());
        sendRaw(raw.get(), std::span(kHead).first(std::min(bytes, kHead.size())));
        if (bytes > kHead.size())
            sendRaw(raw.get(), std::array<std::byte, 1>{});
        ::shutdown(raw.get(), SHUT_WR);
        EXPECT_TRUE(eventually([&] { return stack->stats().handshakeErrors > before; }, 20s))
            << bytes;
    }
}

TEST(ClcStranger, ServerHandshakeWaitsOutAPartialProposalAsleep)
{
    auto stack = makeStack();
    SocketOptions o;
    o.clcTimeout = 600ms;
    Listener l = std::move(Listener::listen(*stack, "127.0.0.1", 0, o)).value();
    // One in the eyecatcher (deciding whether it is CLC), one in the header after it.
    UniqueFd inEyecatcher = connectRaw(l.port());
    sendRaw(inEyecatcher.get(), std::span(kHead).first(3));
    UniqueFd inHeader = connectRaw(l.port());
    sendRaw(inHeader.get(), kHead);
    const auto cpu = processCpu();
    std::this_thread::sleep_for(400ms);
    // Two threads spinning would cost 800 ms.
    EXPECT_LT(processCpu() - cpu, 200ms);
    // Both end at the deadline: too little to tell CLC is TCP (its bytes the application's),
    // part of a header a hard error.
    EXPECT_TRUE(eventually(
        [&] {
            const StackStats s = stack->stats();
            return s.handshakeErrors == 1 &&
                   s.serverFallbacks.contains(clc::DeclineCode::PeerNoSmc);
        },
        20s));
}

// Past the handshake limit a connection goes to TCP at once and its first receive skips the
// PROPOSAL: part of a header makes neither recv nor the application's poll spin.
TEST(ClcStranger, ALimitedConnectionSleepsThroughAPartialProposal)
{
    auto stack = makeStack();
    SocketOptions o;
    o.clcTimeout = 60s;
    o.recvTimeout = 400ms;
    Listener l =
        std::move(Listener::listen(*stack, "127.0.0.1", 0, o, {.handshakeLimit = 1})).value();
    UniqueFd holder = connectRaw(l.port()); // silent: holds the one handshake
    UniqueFd raw = connectRaw(l.port());
    Socket s = std::move(l.accept(20s)).value();
    ASSERT_EQ(s.transport(), Transport::Tcp);
    sendRaw(raw.get(), std::span(kHead).first(3));
    std::array<std::byte, 16> buf{};
    const auto cpu = processCpu();
    Result<std::size_t> n = within(20s, [&] { return s.recv(buf); });
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
    pollfd p{s.pollFd().value(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 200), 0) << "readable with no application bytes";
    EXPECT_LT(processCpu() - cpu, 300ms);
    // The end after part of a header: the end of the stream, nothing of the header seen.
    ::shutdown(raw.get(), SHUT_WR);
    n = within(20s, [&] { return s.recv(buf); });
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 0u);
}

// A TCP pair on loopback: what one end sends, the other (non-blocking) reads.
std::array<UniqueFd, 2> loopbackPair()
{
    auto at = net::resolve("127.0.0.1", 0, true).value();
    UniqueFd l = std::move(net::listenTcp(at, 4)).value();
    std::array<UniqueFd, 2> ends;
    ends[0] = connectRaw(net::localAddress(l.get()).value().port());
    EXPECT_TRUE(net::waitFor(l.get(), POLLIN, net::deadlineAfter(5s)));
    ends[1] = UniqueFd(::accept4(l.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    EXPECT_TRUE(ends[1].valid());
    return ends;
}

// What firstMessageQueued saw stands in for the reads' own looks: the message is read whole
// from it, and what follows the message stays the application's.
TEST(ClcStranger, TheHeadFirstMessageQueuedSawReadsTheMessageAndNoMore)
{
    auto ends = loopbackPair();
    const clc::Decline sent = clc::makeDecline(clc::DeclineCode::PeerNoSmc, clc::kVersion2, {});
    ASSERT_TRUE(net::writeClc(ends[0].get(), sent, net::deadlineAfter(5s)));
    bool raised = false;
    net::ClcHead seen;
    ASSERT_TRUE(
        eventually([&] { return net::firstMessageQueued(ends[1].get(), raised, &seen); }, 5s));
    EXPECT_TRUE(net::onlyOneMessage(seen));
    sendRaw(ends[0].get(), std::as_bytes(std::span("after", 5)));
    ASSERT_TRUE(eventually(
        [&] {
            return net::firstMessageQueued(ends[1].get(), raised, &seen) &&
                   seen.queued == clc::kDeclineSizeV2 + 5;
        },
        5s));
    EXPECT_FALSE(net::onlyOneMessage(seen)) << "bytes behind the message";
    EXPECT_FALSE(raised);
    ASSERT_EQ(seen.size(), clc::kHeaderSize);
    ASSERT_EQ(net::startsWithClc(ends[1].get(), net::deadlineAfter(5s), &seen).value(), true);
    Result<clc::Message> m = net::readClc(ends[1].get(), net::deadlineAfter(5s), &seen);
    ASSERT_TRUE(m) << m.error().message();
    ASSERT_TRUE(std::holds_alternative<clc::Decline>(*m));
    EXPECT_EQ(std::get<clc::Decline>(*m), sent);
    std::array<char, 16> rest{};
    EXPECT_EQ(::recv(ends[1].get(), rest.data(), rest.size(), 0), 5);
    EXPECT_EQ(std::string_view(rest.data(), 5), "after");
}

// Another protocol's first bytes, as seen: not CLC, and nothing of them is consumed.
TEST(ClcStranger, ASeenHeadOfAnotherProtocolConsumesNothing)
{
    auto ends = loopbackPair();
    sendRaw(ends[0].get(), std::as_bytes(std::span("GET / HTTP/1.1", 14)));
    bool raised = false;
    net::ClcHead seen;
    ASSERT_TRUE(
        eventually([&] { return net::firstMessageQueued(ends[1].get(), raised, &seen); }, 5s));
    ASSERT_GT(seen.size(), 0u);
    EXPECT_EQ(net::startsWithClc(ends[1].get(), net::deadlineAfter(5s), &seen).value(), false);
    std::array<char, 32> got{};
    EXPECT_EQ(::recv(ends[1].get(), got.data(), got.size(), 0), 14);
    EXPECT_EQ(std::string_view(got.data(), 14), "GET / HTTP/1.1");
}

// A stranger that proposes the server's own GID (any ACCEPT shows it) has the server grant its
// RMBs to itself; CONFIRMs naming each other's RMB would then wire two of the server's
// connections to each other. The server refuses them.
TEST(ClcStranger, ConfirmsCannotWireTheServerToItself)
{
    auto stack = makeStack();
    SocketOptions o;
    o.clcTimeout = 10s;
    Listener l = std::move(Listener::listen(*stack, "127.0.0.1", 0, o)).value();
    const clc::Proposal p =
        net::smcdProposal(coreOf(*stack).device().localGid(), coreOf(*stack).ueid());
    std::array<UniqueFd, 2> raw;
    std::array<clc::Accept, 2> accepts;
    for (std::size_t i = 0; i < 2; ++i) {
        raw[i] = connectRaw(l.port());
        ASSERT_TRUE(net::writeClc(raw[i].get(), p, net::deadlineAfter(5s)));
        Result<clc::Message> m = net::readClc(raw[i].get(), net::deadlineAfter(10s));
        ASSERT_TRUE(m) << m.error().message();
        ASSERT_TRUE(std::holds_alternative<clc::Accept>(*m));
        accepts[i] = std::get<clc::Accept>(*m);
    }
    for (std::size_t i = 0; i < 2; ++i) {
        clc::Confirm c;
        static_cast<clc::AcceptConfirm&>(c) = accepts[1 - i]; // the other connection's RMB
        ASSERT_TRUE(net::writeClc(raw[i].get(), c, net::deadlineAfter(5s)));
    }
    EXPECT_TRUE(eventually([&] { return stack->stats().handshakeErrors == 2; }, 20s));
    EXPECT_EQ(stack->stats().smcdServer, 0u);
    EXPECT_FALSE(l.accept(200ms)) << "a connection wired to another of ours came up";
}

} // namespace
} // namespace smc
