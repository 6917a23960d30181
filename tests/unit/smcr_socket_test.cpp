// SPDX-License-Identifier: MIT
// Sockets over SMC-R: two stacks of one process on an in-process fabric, CLC over real TCP.
#include "smc/socket/socket.h"
#include "smc/stack/stack_smcr.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "smc/socket/smcss.h"
#include "smc/testing/inproc_fabric.h"
#include "tests/libtest/link_groups.h"
#include "tests/libtest/smcr_stacks.h"
#include "tests/libtest/socket_stream.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using namespace test::smcr_stacks;
using test::eventually;
using test::recvStream;
using test::sendStream;

using Pair = test::SocketPair;
Pair connectPair(SmcStack& serverStack, SmcStack& clientStack)
{
    return test::connectPair(serverStack, clientStack, smcrOnly(), smcrOnly());
}

std::int64_t inUse(LinkGroup& g)
{
    const PoolStats s = g.pool().stats();
    return s.rmb.inUseBytes + s.sndbuf.inUseBytes;
}

TEST(SmcrSocket, StreamsBothWaysIntactAndShowsAsSmcr)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    Pair p = connectPair(*server, *client);
    ASSERT_EQ(p.client.transport(), Transport::SmcR);
    ASSERT_EQ(p.server.transport(), Transport::SmcR);

    constexpr std::uint64_t kBytes = 24 << 20;
    std::uint64_t up = 0, down = 0;
    Result<std::uint64_t> upWrong = 0, downWrong = 0;
    std::thread reader([&] { upWrong = recvStream(p.server, 1, up); });
    std::thread writer([&] { ASSERT_TRUE(sendStream(p.server, kBytes, 2)); });
    ASSERT_TRUE(sendStream(p.client, kBytes, 1));
    downWrong = recvStream(p.client, 2, down);
    reader.join();
    writer.join();
    ASSERT_TRUE(upWrong) << upWrong.error().message();
    ASSERT_TRUE(downWrong) << downWrong.error().message();
    EXPECT_EQ(up, kBytes);
    EXPECT_EQ(down, kBytes);
    EXPECT_EQ(*upWrong, 0u);
    EXPECT_EQ(*downWrong, 0u);

    const ConnectionInfo ci = p.client.info();
    EXPECT_EQ(ci.transport, Transport::SmcR);
    EXPECT_EQ(ci.bytesSent, kBytes);
    EXPECT_EQ(ci.bytesReceived, kBytes);
    EXPECT_NE(ci.linkId, 0);
    EXPECT_EQ(ci.peerToken, p.server.info().token);
    EXPECT_NE(smcssTable(client->connections()).find("SMCR link"), std::string::npos);
    EXPECT_NE(smcssJson(client->connections(), client->stats()).find("\"mode\": \"SMCR\""),
              std::string::npos);
    EXPECT_EQ(client->stats().smcrClient, 1u);
    EXPECT_EQ(server->stats().smcrServer, 1u);
}

TEST(SmcrSocket, TheSendBufferIsSizedApartFromTheReceiveBuffer)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    SocketOptions o = smcrOnly();
    o.rmbBytes = 32 * 1024;
    o.sndbufBytes = 100 * 1024; // rounded up to a size class, as Linux does
    Pair p = test::connectPair(*server, *client, smcrOnly(), o);
    ASSERT_EQ(p.client.transport(), Transport::SmcR);
    const ConnectionInfo ci = p.client.info();
    EXPECT_EQ(ci.rmbBytes, 32u * 1024);
    EXPECT_EQ(ci.sndbufBytes, 128u * 1024);
    EXPECT_EQ(p.server.info().sndbufBytes, 64u * 1024) << "unset: as the receive buffer";
    EXPECT_NE(smcssJson(client->connections(), client->stats()).find("\"sndbuf_bytes\": 131072"),
              std::string::npos);
    std::uint64_t got = 0;
    Result<std::uint64_t> wrong = 0;
    std::thread reader([&] { wrong = recvStream(p.server, 3, got); });
    EXPECT_TRUE(sendStream(p.client, 1 << 20, 3));
    reader.join();
    ASSERT_TRUE(wrong) << wrong.error().message();
    EXPECT_EQ(got, 1u << 20);
    EXPECT_EQ(*wrong, 0u);
}

TEST(SmcrSocket, SecondSocketJoinsTheGroupAndCloseGivesEveryBufferBack)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    Pair a = connectPair(*server, *client);
    Pair b = connectPair(*server, *client);
    ASSERT_EQ(b.client.transport(), Transport::SmcR)
        << clc::toString(b.client.fallbackReason().value_or(clc::DeclineCode{}));
    std::shared_ptr<LinkGroup> sg = coreOf(*server).smcr()->groups->find(Role::Server, kClientId);
    std::shared_ptr<LinkGroup> cg = coreOf(*client).smcr()->groups->find(Role::Client, kServerId);
    ASSERT_TRUE(sg && cg);
    EXPECT_EQ(sg->connectionCount(), 2u);
    EXPECT_EQ(coreOf(*server).smcr()->groups->groups().size(), 1u);

    // Data on one does not show on the other.
    const std::byte hello[5] = {std::byte{'h'}, std::byte{'e'}, std::byte{'l'}, std::byte{'l'},
                                std::byte{'o'}};
    ASSERT_TRUE(b.client.send(hello));
    std::byte got[16];
    Result<std::size_t> n = b.server.recv(got);
    ASSERT_TRUE(n);
    EXPECT_EQ(*n, 5u);
    a.server.setNonBlocking(true);
    EXPECT_EQ(a.server.recv(got).error(), std::errc::resource_unavailable_try_again);

    // An orderly close: the peer reads EOF, then closes too; nothing stays leased.
    a.client.close();
    a.server.setNonBlocking(false);
    n = a.server.recv(got);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 0u);
    a.server.close();
    b.client.close();
    b.server.close();
    EXPECT_EQ(inUse(*sg), 0);
    EXPECT_EQ(inUse(*cg), 0);
}

// One SMC-R connection on a group with two links, both ends' groups at hand.
class SmcrTwoLinks : public ::testing::Test
{
protected:
    void SetUp() override
    {
        server = makeStack(&f, kServerId);
        client = makeStack(&f, kClientId);
        p = connectPair(*server, *client);
        ASSERT_EQ(p.client.transport(), Transport::SmcR);
        sg = coreOf(*server).smcr()->groups->find(Role::Server, kClientId);
        cg = coreOf(*client).smcr()->groups->find(Role::Client, kServerId);
        ASSERT_TRUE(sg && cg);
        ASSERT_TRUE(eventually([&] { return sg->activeLinks() == 2 && cg->activeLinks() == 2; }));
    }

    Fabric f;
    std::unique_ptr<SmcStack> server, client;
    Pair p;
    std::shared_ptr<LinkGroup> sg, cg;
};

TEST_F(SmcrTwoLinks, ALinkBrokenMidStreamLosesNothing)
{
    constexpr std::uint64_t kBytes = 32 << 20;
    std::atomic<std::uint64_t> progress{0};
    std::uint64_t received = 0;
    Result<std::uint64_t> wrong = 0;
    std::thread reader([&] { wrong = recvStream(p.server, 3, received, &progress); });
    const std::uint8_t before = p.server.info().linkId;
    std::thread breaker([&] {
        while (progress.load() < kBytes / 4)
            std::this_thread::yield();
        // The link the connection rides now, as the server sees it.
        const ConnectionInfo si = p.server.info();
        for (unsigned slot = 0; slot < 3; ++slot) {
            if (sg->linkId(slot) == si.linkId) {
                EXPECT_TRUE(sg->breakLink(slot));
            }
        }
    });
    ASSERT_TRUE(sendStream(p.client, kBytes, 3));
    reader.join();
    breaker.join();
    ASSERT_TRUE(wrong) << wrong.error().message();
    EXPECT_EQ(received, kBytes);
    EXPECT_EQ(*wrong, 0u);
    EXPECT_NE(p.server.info().linkId, before); // failover moved it
    EXPECT_FALSE(sg->terminated());
    EXPECT_FALSE(cg->terminated());
}

// A port that comes back (the provider's path-up event) gives the groups their second link
// again, as Linux re-adds it; here both sides hear the event at once, so the server's
// ADD_LINK and the client's REQ_ADD_LINK race for the group's flow, and one link comes of it.
TEST_F(SmcrTwoLinks, APortBackUpGivesTheGroupItsSecondLinkAgain)
{
    auto links = [&] {
        return "server " + std::to_string(sg->activeLinks()) + " " + toString(sg->type()) +
               ", client " + std::to_string(cg->activeLinks()) + " " + toString(cg->type()) +
               ", connection on link " + std::to_string(p.server.info().linkId);
    };
    const std::uint8_t linkId = p.server.info().linkId;
    ASSERT_NE(linkId, 0) << links();
    for (unsigned slot = 0; slot < 3; ++slot) {
        if (sg->linkId(slot) == linkId) {
            ASSERT_TRUE(sg->breakLink(slot)) << links();
        }
    }
    ASSERT_TRUE(eventually([&] { return sg->activeLinks() == 1 && cg->activeLinks() == 1; }))
        << links();
    f.fabric.portUp();
    ASSERT_TRUE(eventually([&] { return sg->activeLinks() == 2 && cg->activeLinks() == 2; }))
        << links();
    EXPECT_EQ(sg->type(), GroupType::Symmetric);
    EXPECT_EQ(cg->type(), GroupType::Symmetric);
    f.fabric.portUp(); // a complete group adds nothing
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(sg->activeLinks(), 2u);

    // The connection still carries bytes both ways, on whichever link.
    constexpr std::uint64_t kBytes = 4 << 20;
    std::uint64_t received = 0;
    Result<std::uint64_t> wrong = 0;
    std::thread reader([&] { wrong = recvStream(p.server, 5, received); });
    ASSERT_TRUE(sendStream(p.client, kBytes, 5));
    reader.join();
    ASSERT_TRUE(wrong) << wrong.error().message();
    EXPECT_EQ(received, kBytes);
    EXPECT_EQ(*wrong, 0u);
    EXPECT_FALSE(sg->terminated());
}

// The group ends under open sockets: the managers let go of it at once and its links go
// soon after (no QP or registration stays), while the sockets still hold it until they close.
TEST(SmcrSocket, ASocketOutlivesItsEndedGroupAndClosesSafely)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    Pair p = connectPair(*server, *client);
    ASSERT_EQ(p.client.transport(), Transport::SmcR);
    coreOf(*server).smcr()->groups->find(Role::Server, kClientId)->terminate("test");
    // DELETE_LINK ALL ends the client's group too.
    EXPECT_TRUE(eventually([&] { return coreOf(*server).smcr()->groups->groups().empty(); }));
    EXPECT_TRUE(eventually([&] { return coreOf(*client).smcr()->groups->groups().empty(); }));
    std::byte got[16];
    EXPECT_EQ(p.server.recv(got).error(), std::errc::connection_reset);
    EXPECT_EQ(p.client.recv(got).error(), std::errc::connection_reset);
    EXPECT_TRUE(eventually([&] { return f.serverReg.live() == 0 && f.clientReg.live() == 0; }))
        << f.serverReg.live() << " " << f.clientReg.live();
    p.server.close();
    p.client.close();
}

TEST(SmcrSocket, AClientWithoutSmcrFallsBackAndTheBytesStillFlow)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto plain = std::move(SmcStack::create()).value(); // SMC-D only
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0, smcrOnly())).value();
    Result<Socket> c = Socket::connect(*plain, "127.0.0.1", l.port(), {}); // Auto: SMC-D
    ASSERT_TRUE(c) << c.error().message();
    Result<Socket> s = l.accept(10s);
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(c->transport(), Transport::Tcp);
    EXPECT_EQ(s->transport(), Transport::Tcp);
    EXPECT_TRUE(c->fallbackReason().has_value());
    std::uint64_t received = 0;
    Result<std::uint64_t> wrong = 0;
    std::thread reader([&] { wrong = recvStream(*s, 4, received); });
    ASSERT_TRUE(sendStream(*c, 1 << 20, 4));
    reader.join();
    ASSERT_TRUE(wrong);
    EXPECT_EQ(received, 1u << 20);
    EXPECT_EQ(*wrong, 0u);
}

} // namespace
} // namespace smc
