// SPDX-License-Identifier: MIT
// The SMC-R CLC handshake over real TCP between two stacks sharing one in-process fabric:
// first contact, joining, Auto, fallbacks, SMC-Rv2 (a crafted peer: smcr_handshake_peer_test.cpp).
#include "smc/handshake/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <thread>

#include "smc/net/clc_io.h"
#include "smc/socket/socket.h"
#include "smc/stack/stack_smcr.h"
#include "tests/libtest/smcr_stacks.h"

namespace smc
{
namespace
{

using namespace test::smcr_stacks;

TEST(SmcrHandshake, FirstContactMakesOneGroupEachSideWithBothLinks)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    TcpPair p = tcpPair();
    Both b = handshake(*server, *client, p);
    const net::SmcrSetup* c = smcr(b.client);
    const net::SmcrSetup* s = smcr(b.server);
    ASSERT_TRUE(c) << (b.client ? "not SMC-R" : b.client.error().message());
    ASSERT_TRUE(s) << (b.server ? "not SMC-R" : b.server.error().message());
    EXPECT_TRUE(c->firstContact);
    EXPECT_TRUE(s->firstContact);
    EXPECT_EQ(coreOf(*server).smcr()->groups->groups().size(), 1u);
    EXPECT_EQ(coreOf(*client).smcr()->groups->groups().size(), 1u);
    EXPECT_EQ(s->group->role(), Role::Server);
    EXPECT_EQ(s->group->peer(), kClientId);
    EXPECT_EQ(c->group->peer(), kServerId);
    // Each side's alert token and RMB as the other learnt them.
    EXPECT_EQ(c->peerToken, s->conn->token);
    EXPECT_EQ(s->peerToken, c->conn->token);
    EXPECT_EQ(c->peerRmbBytes, s->conn->rmb.size());
    EXPECT_EQ(s->peerRmbBytes, c->conn->rmb.size());
    // Two devices each side: CONFIRM_LINK, then ADD_LINK (done before the server returns).
    EXPECT_EQ(s->group->activeLinks(), 2u);
    EXPECT_TRUE(waitLinks(*c->group, 2));
}

TEST(SmcrHandshake, OneDeviceEachSideStillComesUp)
{
    Fabric f;
    f.fabric.serverDevices = 1;
    f.fabric.clientDevices = 1;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    TcpPair p = tcpPair();
    Both b = handshake(*server, *client, p);
    ASSERT_TRUE(smcr(b.client) && smcr(b.server));
    // Linux adds a second link on the same device pair when there is no other (symmetric
    // links want distinct devices; an asymmetric one is still a link): at least one is up.
    EXPECT_GE(smcr(b.server)->group->activeLinks(), 1u);
    EXPECT_GE(smcr(b.client)->group->activeLinks(), 1u);
}

TEST(SmcrHandshake, SecondConnectionJoinsTheGroupAndWritesLand)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    TcpPair p1 = tcpPair();
    Both first = handshake(*server, *client, p1);
    ASSERT_TRUE(smcr(first.client) && smcr(first.server));
    ASSERT_TRUE(waitLinks(*smcr(first.client)->group, 2));
    TcpPair p2 = tcpPair();
    Both second = handshake(*server, *client, p2);
    const net::SmcrSetup* c = smcr(second.client);
    const net::SmcrSetup* s = smcr(second.server);
    ASSERT_TRUE(c) << (second.client ? "not SMC-R" : second.client.error().message());
    ASSERT_TRUE(s) << (second.server ? "not SMC-R" : second.server.error().message());
    EXPECT_FALSE(c->firstContact);
    EXPECT_FALSE(s->firstContact);
    EXPECT_EQ(c->group, smcr(first.client)->group);
    EXPECT_EQ(s->group, smcr(first.server)->group);
    EXPECT_EQ(coreOf(*server).smcr()->groups->groups().size(), 1u);
    EXPECT_EQ(coreOf(*client).smcr()->groups->groups().size(), 1u);
    EXPECT_EQ(s->group->connectionCount(), 2u);
    EXPECT_EQ(c->group->connectionCount(), 2u);

    // Each connection's writes land in its peer's RMB, and only there.
    for (const Both* b : {&first, &second}) {
        const net::SmcrSetup& cs = *smcr(b->client);
        const net::SmcrSetup& ss = *smcr(b->server);
        std::vector<std::byte> up(1000), down(700);
        for (std::size_t i = 0; i < up.size(); ++i)
            up[i] = static_cast<std::byte>(i * 7 + (b == &first ? 1 : 2));
        for (std::size_t i = 0; i < down.size(); ++i)
            down[i] = static_cast<std::byte>(i * 13 + 5);
        ASSERT_TRUE(cs.group->write(*cs.conn, 100, up));
        EXPECT_EQ(std::memcmp(ss.conn->rmb.data() + 100, up.data(), up.size()), 0);
        ASSERT_TRUE(ss.group->write(*ss.conn, 0, down));
        EXPECT_EQ(std::memcmp(cs.conn->rmb.data(), down.data(), down.size()), 0);
    }
    EXPECT_NE(std::memcmp(smcr(first.server)->conn->rmb.data() + 100,
                          smcr(second.server)->conn->rmb.data() + 100, 1000),
              0);
}

TEST(SmcrHandshake, AutoOffersBothAndAnSmcrServerTakesSmcr)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    TcpPair p = tcpPair();
    SocketOptions automatic;
    automatic.mode = Mode::Auto;
    Both b = handshake(*server, *client, p, smcrOnly(), automatic);
    ASSERT_TRUE(smcr(b.client)) << (b.client ? "not SMC-R" : b.client.error().message());
    ASSERT_TRUE(smcr(b.server));
    EXPECT_TRUE(smcr(b.client)->firstContact);
}

TEST(SmcrHandshake, AutoOnBothEndsPrefersSmcd)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0)).value();
    Result<Socket> c = Socket::connect(*client, "127.0.0.1", l.port());
    ASSERT_TRUE(c) << c.error().message();
    Socket s = std::move(l.accept(10s)).value();
    EXPECT_EQ(c->transport(), Transport::SmcD);
    EXPECT_EQ(s.transport(), Transport::SmcD);
    EXPECT_TRUE(coreOf(*server).smcr()->groups->groups().empty());
}

TEST(SmcrHandshake, NoSmcrOnTheServerFallsBackOnTheSameSocket)
{
    Fabric f;
    auto server = makeStack(nullptr, kServerId);
    auto client = makeStack(&f, kClientId);
    TcpPair p = tcpPair();
    Both b = handshake(*server, *client, p);
    ASSERT_TRUE(b.client && b.server);
    const auto* cf = std::get_if<net::Fallback>(&*b.client);
    const auto* sf = std::get_if<net::Fallback>(&*b.server);
    ASSERT_TRUE(cf && sf);
    // Linux's server (smc_find_rdma_v1_device_serv) says NOSMCDEV when no RoCE device takes
    // a v1 offer and no earlier reason was stored; negotiate() does the same.
    EXPECT_EQ(cf->reason, clc::DeclineCode::NoSmcDev);
    EXPECT_TRUE(cf->peerDeclined);
    EXPECT_EQ(sf->reason, clc::DeclineCode::NoSmcDev);
    EXPECT_FALSE(sf->peerDeclined);
    EXPECT_TRUE(coreOf(*client).smcr()->groups->groups().empty());
    expectBytesBothWays(p.client.get(), p.server.get());
}

TEST(SmcrHandshake, SocketFallbackIsCountedByReason)
{
    Fabric f;
    auto server = makeStack(nullptr, kServerId);
    auto client = makeStack(&f, kClientId);
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0)).value();
    Result<Socket> c = Socket::connect(*client, "127.0.0.1", l.port(), smcrOnly());
    ASSERT_TRUE(c) << c.error().message();
    Socket s = std::move(l.accept(10s)).value();
    EXPECT_EQ(c->transport(), Transport::Tcp);
    EXPECT_EQ(client->stats().clientFallbacks[clc::DeclineCode::NoSmcDev], 1u);
    EXPECT_EQ(server->stats().serverFallbacks[clc::DeclineCode::NoSmcDev], 1u);
    const std::array<std::byte, 3> hi{std::byte{1}, std::byte{2}, std::byte{3}};
    ASSERT_EQ(c->send(hi).value(), 3u);
    std::array<std::byte, 3> got{};
    std::size_t have = 0;
    while (have < 3)
        have += s.recv(std::span(got).subspan(have)).value();
    EXPECT_EQ(got, hi);
}

TEST(SmcrHandshake, ClientWithoutSmcrDeviceDeclinesBeforeProposing)
{
    auto server = makeStack(nullptr, kServerId);
    auto client = makeStack(nullptr, kClientId);
    TcpPair p = tcpPair();
    Both b = handshake(*server, *client, p);
    ASSERT_TRUE(b.client && b.server);
    EXPECT_EQ(std::get<net::Fallback>(*b.client).reason, clc::DeclineCode::NoSmcrDev);
    EXPECT_TRUE(std::get<net::Fallback>(*b.server).peerDeclined);
    expectBytesBothWays(p.client.get(), p.server.get());
}

// Two client stacks with one system id (ids can collide) but other devices:
// the second gets its own group, not an offer to reuse the first's, which its
// client would decline out of sync and the server would end the first's group.
TEST(SmcrHandshake, ASameSystemIdFromAnotherDeviceIsAFirstContact)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    TcpPair p1 = tcpPair();
    Both first = handshake(*server, *client, p1);
    ASSERT_TRUE(smcr(first.client) && smcr(first.server));
    ASSERT_TRUE(waitLinks(*smcr(first.client)->group, 2));

    StackConfig config;
    SmcrConfig r;
    r.gid = InprocFabric::clientGid();
    r.gid[15] = 0x77;
    r.mac = {2, 0, 0, 0, 0x77, 0x77};
    r.systemId = kClientId;
    r.groups.timeouts.testLink = 0ms;
    config.smcr = r;
    auto other = std::move(smc::makeStack(config, {.provider = &f.fabric})).value();
    TcpPair p2 = tcpPair();
    Both second = handshake(*server, *other, p2);
    const net::SmcrSetup* c = smcr(second.client);
    const net::SmcrSetup* s = smcr(second.server);
    ASSERT_TRUE(c) << (second.client ? "not SMC-R" : second.client.error().message());
    ASSERT_TRUE(s) << (second.server ? "not SMC-R" : second.server.error().message());
    EXPECT_TRUE(c->firstContact);
    EXPECT_TRUE(s->firstContact);
    EXPECT_NE(s->group, smcr(first.server)->group);
    EXPECT_EQ(coreOf(*server).smcr()->groups->groups().size(), 2u);

    // The first client's group lives on and still carries its connection.
    const net::SmcrSetup& fs = *smcr(first.server);
    const net::SmcrSetup& fc = *smcr(first.client);
    EXPECT_FALSE(fs.group->terminated());
    EXPECT_FALSE(fc.group->terminated());
    std::vector<std::byte> up(64, std::byte{0x5a});
    ASSERT_TRUE(fc.group->write(*fc.conn, 0, up));
    EXPECT_EQ(std::memcmp(fs.conn->rmb.data(), up.data(), up.size()), 0);
}

TEST(SmcrHandshake, AFullGroupMakesTheNextConnectionAFirstContact)
{
    Fabric f;
    auto server = makeStack(&f, kServerId, 16); // Linux's smallest max conns
    auto client = makeStack(&f, kClientId);
    std::vector<TcpPair> pairs;
    std::vector<Both> done;
    for (int i = 0; i < 17; ++i) {
        pairs.push_back(tcpPair());
        done.push_back(handshake(*server, *client, pairs.back()));
        ASSERT_TRUE(smcr(done.back().client) && smcr(done.back().server)) << "connection " << i;
        if (i == 0) {
            ASSERT_TRUE(waitLinks(*smcr(done[0].client)->group, 2));
        }
    }
    EXPECT_TRUE(smcr(done[16].server)->firstContact);
    EXPECT_TRUE(smcr(done[16].client)->firstContact);
    EXPECT_NE(smcr(done[16].server)->group, smcr(done[0].server)->group);
    EXPECT_EQ(coreOf(*server).smcr()->groups->groups().size(), 2u);
    EXPECT_EQ(coreOf(*client).smcr()->groups->groups().size(), 2u);
    EXPECT_EQ(smcr(done[0].server)->group->connectionCount(), 16u);
}

// A client that offers SMC-Rv2 gets it (the server takes v2 before v1, as Linux does): a v2
// group each side whose second link came by the v2 ADD_LINK (the rkeys in its extension, no
// ADD_LINK_CONT), and the next connection joins it by the GID of the v2 extension. When the
// connection's link breaks, it carries on over the other link with the rkeys the ADD_LINKs
// gave.
TEST(SmcrHandshake, V2GroupsTakeTwoLinksAndAJoinAndFailOver)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId, 255, 0ms, true);
    std::vector<TcpPair> pairs;
    std::vector<Both> done;
    for (int i = 0; i < 2; ++i) {
        pairs.push_back(tcpPair());
        done.push_back(handshake(*server, *client, pairs.back()));
        const net::SmcrSetup* c = smcr(done.back().client);
        const net::SmcrSetup* s = smcr(done.back().server);
        ASSERT_TRUE(c) << (done.back().client ? "not SMC-R" : done.back().client.error().message());
        ASSERT_TRUE(s) << (done.back().server ? "not SMC-R" : done.back().server.error().message());
        EXPECT_EQ(c->firstContact, i == 0);
        EXPECT_EQ(s->firstContact, i == 0);
        EXPECT_EQ(s->group, smcr(done[0].server)->group);
        EXPECT_EQ(c->group, smcr(done[0].client)->group);
        if (i == 0) {
            ASSERT_TRUE(waitLinks(*c->group, 2));
        }
    }
    for (const net::SmcrSetup* side : {smcr(done[0].server), smcr(done[0].client)}) {
        EXPECT_EQ(side->group->llcVersion(), 2u);
        EXPECT_EQ(side->group->activeLinks(), 2u);
        EXPECT_EQ(side->group->type(), GroupType::Symmetric);
        EXPECT_EQ(side->group->connectionCount(), 2u);
    }
    EXPECT_EQ(coreOf(*server).smcr()->groups->groups().size(), 1u);

    const net::SmcrSetup& s = *smcr(done[1].server);
    const net::SmcrSetup& c = *smcr(done[1].client);
    const unsigned before = s.conn->link();
    ASSERT_TRUE(s.group->breakLink(before));
    ASSERT_TRUE(
        eventually([&] { return s.conn->link() != before && c.group->activeLinks() == 1; }));
    std::vector<std::byte> up(64, std::byte{0x5a}), down(64, std::byte{0xa5});
    ASSERT_TRUE(c.group->write(*c.conn, 0, up));
    ASSERT_TRUE(s.group->write(*s.conn, 0, down));
    EXPECT_EQ(std::memcmp(s.conn->rmb.data(), up.data(), up.size()), 0);
    EXPECT_EQ(std::memcmp(c.conn->rmb.data(), down.data(), down.size()), 0);
}

// Groups of the two versions are apart: a v1 client with the system id and GID of a v2 group
// is a first contact of its own, with two links.
TEST(SmcrHandshake, AV1ClientDoesNotJoinAV2Group)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto v2 = makeStack(&f, kClientId, 255, 0ms, true);
    auto v1 = makeStack(&f, kClientId);
    TcpPair p1 = tcpPair(), p2 = tcpPair();
    Both first = handshake(*server, *v2, p1);
    ASSERT_TRUE(smcr(first.server));
    Both second = handshake(*server, *v1, p2);
    const net::SmcrSetup* s = smcr(second.server);
    ASSERT_TRUE(s) << (second.server ? "not SMC-R" : second.server.error().message());
    EXPECT_TRUE(s->firstContact);
    EXPECT_EQ(s->group->llcVersion(), 1u);
    EXPECT_NE(s->group, smcr(first.server)->group);
    EXPECT_TRUE(waitLinks(*smcr(second.client)->group, 2));
}

// A stack that closes ends its groups with DELETE_LINK ALL: the peer's group hears it and ends,
// rather than waiting for its links to fail.
TEST(SmcrHandshake, AClosingStackSaysDeleteLinkToItsPeers)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    TcpPair p = tcpPair();
    Both b = handshake(*server, *client, p);
    ASSERT_TRUE(smcr(b.server) && smcr(b.client));
    ASSERT_TRUE(waitLinks(*smcr(b.client)->group, 2));
    std::shared_ptr<LinkGroup> group = smcr(b.server)->group;
    const std::uint64_t heard = group->stats().messagesIn;
    b.client = std::make_error_code(std::errc::io_error); // its group and connection go
    client.reset();
    EXPECT_TRUE(eventually([&] { return group->terminated(); }));
    EXPECT_EQ(group->stats().messagesIn, heard + 1); // the DELETE_LINK ALL
}

} // namespace
} // namespace smc
