// SPDX-License-Identifier: MIT
// The SMC-R v1 CLC handshake over real TCP between two stacks sharing one in-process fabric.
#include "smc/socket/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <thread>

#include "smc/socket/clc_io.h"
#include "smc/socket/internal/smcr_handshake.h"
#include "smc/socket/socket.h"
#include "smc/socket/tcp.h"
#include "smc/testing/inproc_fabric.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

constexpr SystemId kServerId = {0x11, 0x22, 2, 0, 0, 0, 0, 1};
constexpr SystemId kClientId = {0x33, 0x44, 2, 0, 0, 0, 0, 2};

struct Fabric {
    InprocRegistrar serverReg, clientReg;
    InprocFabric fabric{serverReg, clientReg, 2, 2};
};

std::unique_ptr<SmcStack> makeStack(Fabric* f, const SystemId& id, unsigned maxConns = 255,
                                    std::chrono::milliseconds llcWait = 0ms)
{
    StackConfig config;
    if (f != nullptr) {
        SmcrConfig r;
        r.provider = &f->fabric;
        r.gid = InprocFabric::clientGid(); // where client links start
        r.mac = {2, 0, 0, 0, id[0], id[7]};
        r.systemId = id;
        r.groups.maxConns = maxConns;
        r.groups.timeouts.testLink = 0ms;
        if (llcWait > 0ms) // short CONFIRM_LINK waits, both roles'
            r.groups.timeouts.firstLink = r.groups.timeouts.wait = llcWait;
        config.smcr = r;
    }
    return std::move(SmcStack::create(config)).value();
}

// A connected TCP pair on 127.0.0.1, both ends non-blocking.
struct TcpPair {
    UniqueFd client, server;
};
TcpPair tcpPair()
{
    auto at = net::resolve("127.0.0.1", 0, true).value();
    UniqueFd l = std::move(net::listenTcp(at, 4)).value();
    auto to = net::resolve("127.0.0.1", net::localAddress(l.get()).value().port(), false).value();
    TcpPair p;
    p.client = std::move(net::connectTcp(to, net::deadlineAfter(5s))).value();
    EXPECT_TRUE(net::waitFor(l.get(), POLLIN, net::deadlineAfter(5s)));
    p.server = UniqueFd(::accept4(l.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    EXPECT_TRUE(p.server.valid());
    return p;
}

SocketOptions smcrOnly()
{
    SocketOptions o;
    o.mode = Mode::SmcR;
    o.rmbBytes = 64 * 1024;
    return o;
}

struct Both {
    Result<net::Outcome> client = std::make_error_code(std::errc::io_error);
    Result<net::Outcome> server = std::make_error_code(std::errc::io_error);
};
Both handshake(SmcStack& serverStack, SmcStack& clientStack, const TcpPair& p,
               SocketOptions serverOptions = smcrOnly(), SocketOptions clientOptions = smcrOnly())
{
    Both b;
    std::thread t(
        [&] { b.server = net::serverHandshake(serverStack, p.server.get(), serverOptions); });
    b.client = net::clientHandshake(clientStack, p.client.get(), clientOptions);
    t.join();
    return b;
}

const net::SmcrSetup* smcr(const Result<net::Outcome>& o)
{
    return o ? std::get_if<net::SmcrSetup>(&*o) : nullptr;
}

template <typename F> bool eventually(F f, std::chrono::milliseconds limit = 10s)
{
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!f()) {
        if (std::chrono::steady_clock::now() > end)
            return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

// The client end learns of the second link when the server's ADD_LINK flow has run there.
bool waitLinks(const LinkGroup& g, unsigned n)
{
    for (int i = 0; i < 500 && g.activeLinks() != n; ++i)
        std::this_thread::sleep_for(10ms);
    return g.activeLinks() == n;
}

void expectBytesBothWays(int a, int b)
{
    const char ping[] = "ping", pong[] = "pong";
    ASSERT_EQ(::send(a, ping, 4, MSG_NOSIGNAL), 4);
    ASSERT_EQ(::send(b, pong, 4, MSG_NOSIGNAL), 4);
    char got[4];
    ASSERT_TRUE(net::waitFor(b, POLLIN, net::deadlineAfter(5s)));
    ASSERT_EQ(::recv(b, got, 4, MSG_WAITALL), 4);
    EXPECT_EQ(std::memcmp(got, ping, 4), 0);
    ASSERT_TRUE(net::waitFor(a, POLLIN, net::deadlineAfter(5s)));
    ASSERT_EQ(::recv(a, got, 4, MSG_WAITALL), 4);
    EXPECT_EQ(std::memcmp(got, pong, 4), 0);
}

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
    EXPECT_EQ(server->smcr()->groups->groups().size(), 1u);
    EXPECT_EQ(client->smcr()->groups->groups().size(), 1u);
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
    EXPECT_EQ(server->smcr()->groups->groups().size(), 1u);
    EXPECT_EQ(client->smcr()->groups->groups().size(), 1u);
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
    EXPECT_TRUE(server->smcr()->groups->groups().empty());
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
    EXPECT_TRUE(client->smcr()->groups->groups().empty());
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
    r.provider = &f.fabric;
    r.gid = InprocFabric::clientGid();
    r.gid[15] = 0x77;
    r.mac = {2, 0, 0, 0, 0x77, 0x77};
    r.systemId = kClientId;
    r.groups.timeouts.testLink = 0ms;
    config.smcr = r;
    auto other = std::move(SmcStack::create(config)).value();
    TcpPair p2 = tcpPair();
    Both second = handshake(*server, *other, p2);
    const net::SmcrSetup* c = smcr(second.client);
    const net::SmcrSetup* s = smcr(second.server);
    ASSERT_TRUE(c) << (second.client ? "not SMC-R" : second.client.error().message());
    ASSERT_TRUE(s) << (second.server ? "not SMC-R" : second.server.error().message());
    EXPECT_TRUE(c->firstContact);
    EXPECT_TRUE(s->firstContact);
    EXPECT_NE(s->group, smcr(first.server)->group);
    EXPECT_EQ(server->smcr()->groups->groups().size(), 2u);

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
    EXPECT_EQ(server->smcr()->groups->groups().size(), 2u);
    EXPECT_EQ(client->smcr()->groups->groups().size(), 2u);
    EXPECT_EQ(smcr(done[0].server)->group->connectionCount(), 16u);
}

// A peer playing the client over raw TCP: our PROPOSAL for SMC-R v1.
clc::Proposal fakeProposal(int fd, const SystemId& id,
                           const Gid& gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9},
                           const Mac& mac = {})
{
    clc::Proposal p;
    p.version = clc::kVersion1;
    p.systemId = id;
    p.gid = gid;
    p.mac = mac;
    std::optional<clc::Ipv4Address> local = net::localIpv4(fd);
    EXPECT_TRUE(local);
    p.typeV1 = clc::SmcType::SmcR;
    p.prefixes.ipv4PrefixLength = local->prefixLength;
    p.prefixes.ipv4Subnet = {local->address[0], 0, 0, 0}; // 127/8
    return p;
}

std::vector<std::byte> garbageConfirm()
{
    // An SMC-R CONFIRM header whose length (20) fits no layout.
    std::vector<std::byte> bad = {std::byte{0xe2}, std::byte{0xd4}, std::byte{0xc3},
                                  std::byte{0xd9}, std::byte{0x03}, std::byte{0x00},
                                  std::byte{0x14}, std::byte{0x10}};
    bad.resize(20);
    return bad;
}

TEST(SmcrHandshake, MalformedConfirmIsAnErrorAndLeaksNoBuffer)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    // One real connection, so the fake client's second one joins its group.
    TcpPair real = tcpPair();
    Both b = handshake(*server, *client, real);
    ASSERT_TRUE(smcr(b.server));
    LinkGroup& group = *smcr(b.server)->group;
    const std::int64_t inUse = group.pool().stats().rmb.inUseBytes;

    for (const SystemId& id : {kClientId, SystemId{7, 7, 7, 7, 7, 7, 7, 7}}) {
        TcpPair p = tcpPair();
        auto result = std::async(std::launch::async, [&] {
            return net::serverHandshake(*server, p.server.get(), smcrOnly());
        });
        // The first proposes from the real client's device, so it joins.
        ASSERT_TRUE(net::writeClc(
            p.client.get(),
            fakeProposal(p.client.get(), id, client->smcr()->gid, client->smcr()->mac),
            net::deadlineAfter(5s)));
        Result<clc::Message> accept = net::readClc(p.client.get(), net::deadlineAfter(10s));
        ASSERT_TRUE(accept) << accept.error().message();
        ASSERT_TRUE(std::holds_alternative<clc::Accept>(*accept));
        EXPECT_EQ(std::get<clc::Accept>(*accept).firstContact, id != kClientId);
        ASSERT_TRUE(net::writeAll(p.client.get(), garbageConfirm(), net::deadlineAfter(5s)));
        Result<net::Outcome> r = result.get();
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), std::errc::protocol_error);
    }
    // The joined group is back to its one connection; the new one is gone with its buffers.
    EXPECT_EQ(group.connectionCount(), 1u);
    EXPECT_EQ(group.pool().stats().rmb.inUseBytes, inUse);
    EXPECT_TRUE(eventually([&] { return server->smcr()->groups->groups().size() == 1; }));
    EXPECT_EQ(&*server->smcr()->groups->groups().front(), &group);
}

// A peer that opens TCP, proposes with a fresh system id and then drops (or sends a bad
// CONFIRM) costs the server a group and a link for that handshake only: the terminated
// groups are released, so rounds of it leave no groups, links or registrations behind.
TEST(SmcrHandshake, FailedFirstContactsLeaveNoGroupsBehind)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    constexpr int kRounds = 20;
    for (int i = 0; i < kRounds; ++i) {
        const SystemId id = {0xa0, static_cast<std::uint8_t>(i), 0, 0, 0, 0, 0, 3};
        TcpPair p = tcpPair();
        auto result = std::async(std::launch::async, [&] {
            return net::serverHandshake(*server, p.server.get(), smcrOnly());
        });
        ASSERT_TRUE(net::writeClc(p.client.get(), fakeProposal(p.client.get(), id),
                                  net::deadlineAfter(5s)));
        Result<clc::Message> accept = net::readClc(p.client.get(), net::deadlineAfter(10s));
        ASSERT_TRUE(accept && std::holds_alternative<clc::Accept>(*accept)) << i;
        EXPECT_TRUE(std::get<clc::Accept>(*accept).firstContact);
        if (i % 2 == 0)
            p.client.reset(); // gone without a CONFIRM
        else
            ASSERT_TRUE(net::writeAll(p.client.get(), garbageConfirm(), net::deadlineAfter(5s)));
        EXPECT_FALSE(result.get()) << i;
        // A new first contact releases the ended groups before it makes its own.
        EXPECT_LE(server->smcr()->groups->groups().size(), 1u) << i;
    }
    EXPECT_TRUE(eventually([&] { return server->smcr()->groups->groups().empty(); }));
    EXPECT_TRUE(eventually([&] { return f.serverReg.live() == 0; })) << f.serverReg.live();
}

// A peer playing the server: reads the PROPOSAL, answers `accept` (bytes).
template <typename Answer>
Result<net::Outcome> clientAgainst(SmcStack& client, Answer answer, Result<clc::Message>* after)
{
    TcpPair p = tcpPair();
    std::thread fake([&] {
        Result<clc::Message> prop = net::readClc(p.server.get(), net::deadlineAfter(10s));
        ASSERT_TRUE(prop && std::holds_alternative<clc::Proposal>(*prop));
        EXPECT_TRUE(clc::hasSmcR(std::get<clc::Proposal>(*prop).typeV1));
        answer(p.server.get());
        if (after)
            *after = net::readClc(p.server.get(), net::deadlineAfter(2s));
    });
    Result<net::Outcome> r = net::clientHandshake(client, p.client.get(), smcrOnly());
    fake.join();
    return r;
}

TEST(SmcrHandshake, MalformedAcceptIsAnError)
{
    Fabric f;
    auto client = makeStack(&f, kClientId);
    std::vector<std::byte> bad = garbageConfirm();
    bad[4] = std::byte{0x02}; // an ACCEPT
    Result<net::Outcome> r = clientAgainst(
        *client, [&](int fd) { ASSERT_TRUE(net::writeAll(fd, bad, net::deadlineAfter(5s))); },
        nullptr);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::protocol_error);
    EXPECT_TRUE(client->smcr()->groups->groups().empty());
}

TEST(SmcrHandshake, ReuseOfAnUnknownGroupIsSyncErr)
{
    Fabric f;
    auto client = makeStack(&f, kClientId);
    clc::SmcrAcceptConfirm r;
    r.systemId = {9, 9, 9, 9, 9, 9, 9, 9};
    r.qpn = 4242;
    r.rkey = 1;
    r.rmbAddr = 0x1000;
    r.alertToken = 1;
    r.qpMtu = 3;
    clc::Accept a;
    a.version = clc::kVersion1;
    a.firstContact = false;
    a.path = r;
    Result<clc::Message> answer = std::make_error_code(std::errc::io_error);
    Result<net::Outcome> out = clientAgainst(
        *client, [&](int fd) { ASSERT_TRUE(net::writeClc(fd, a, net::deadlineAfter(5s))); },
        &answer);
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(std::get<net::Fallback>(*out).reason, clc::DeclineCode::SyncErr);
    ASSERT_TRUE(answer) << answer.error().message();
    const auto* d = std::get_if<clc::Decline>(&*answer);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->diagnosis, clc::DeclineCode::SyncErr);
    EXPECT_TRUE(d->outOfSync);
    EXPECT_EQ(d->systemId, kClientId);
}

TEST(SmcrHandshake, NoLinkForTheServerIsIntErrAndBothFallBack)
{
    Fabric f;
    f.fabric.refuseCreates = 1;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    TcpPair p = tcpPair();
    Both b = handshake(*server, *client, p);
    ASSERT_TRUE(b.client && b.server);
    EXPECT_EQ(std::get<net::Fallback>(*b.client).reason, clc::DeclineCode::IntErr);
    EXPECT_EQ(std::get<net::Fallback>(*b.server).reason, clc::DeclineCode::IntErr);
    expectBytesBothWays(p.client.get(), p.server.get());
    // The next connection is a first contact that works.
    TcpPair p2 = tcpPair();
    Both ok = handshake(*server, *client, p2);
    ASSERT_TRUE(smcr(ok.client) && smcr(ok.server));
    EXPECT_TRUE(smcr(ok.server)->firstContact);
}

// The fake server makes the link and sends ACCEPT, then never sends CONFIRM_LINK: the client
// gives up after its CONFIRM_LINK wait, looks for our DECLINE for a second, and declines.
TEST(SmcrHandshake, NoConfirmLinkIsTimeoutClAndAFallback)
{
    Fabric f;
    auto client = makeStack(&f, kClientId, 255, 200ms);
    Result<NewLink> link = f.fabric.create({});
    ASSERT_TRUE(link);
    clc::SmcrAcceptConfirm r;
    r.systemId = kServerId;
    r.gid = link->local.gid;
    r.qpn = link->local.qpn;
    r.rkey = 77;
    r.rmbAddr = 0x10000;
    r.alertToken = 5;
    r.qpMtu = 3;
    clc::Accept a;
    a.version = clc::kVersion1;
    a.firstContact = true;
    a.path = r;
    Result<clc::Message> confirm = std::make_error_code(std::errc::io_error);
    Result<clc::Message> declined = std::make_error_code(std::errc::io_error);
    Result<net::Outcome> out = clientAgainst(
        *client,
        [&](int fd) {
            ASSERT_TRUE(net::writeClc(fd, a, net::deadlineAfter(5s)));
            confirm = net::readClc(fd, net::deadlineAfter(5s));
            declined = net::readClc(fd, net::deadlineAfter(10s));
        },
        nullptr);
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(std::get<net::Fallback>(*out).reason, clc::DeclineCode::TimeoutCl);
    ASSERT_TRUE(confirm && std::holds_alternative<clc::Confirm>(*confirm));
    ASSERT_TRUE(declined && std::holds_alternative<clc::Decline>(*declined));
    EXPECT_EQ(std::get<clc::Decline>(*declined).diagnosis, clc::DeclineCode::TimeoutCl);
    // The ended group is released with its link and buffers.
    EXPECT_TRUE(eventually([&] { return client->smcr()->groups->groups().empty(); }));
    EXPECT_TRUE(eventually([&] { return f.clientReg.live() == 0; })) << f.clientReg.live();
}

// The fake client joins the server's link and sends CONFIRM, then never answers CONFIRM_LINK.
TEST(SmcrHandshake, NoConfirmLinkAnswerIsTimeoutClOnTheServer)
{
    Fabric f;
    auto server = makeStack(&f, kServerId, 255, 200ms);
    TcpPair p = tcpPair();
    auto result = std::async(std::launch::async, [&] {
        return net::serverHandshake(*server, p.server.get(), smcrOnly());
    });
    ASSERT_TRUE(net::writeClc(p.client.get(), fakeProposal(p.client.get(), kClientId),
                              net::deadlineAfter(5s)));
    Result<clc::Message> accept = net::readClc(p.client.get(), net::deadlineAfter(10s));
    ASSERT_TRUE(accept && std::holds_alternative<clc::Accept>(*accept));
    const auto& sa = std::get<clc::SmcrAcceptConfirm>(std::get<clc::Accept>(*accept).path);
    Result<NewLink> link = f.fabric.join({sa.qpn, sa.psn, sa.gid, sa.mac, sa.qpMtu}, {});
    ASSERT_TRUE(link);
    clc::SmcrAcceptConfirm r;
    r.systemId = kClientId;
    r.gid = link->local.gid;
    r.qpn = link->local.qpn;
    r.rkey = 88;
    r.rmbAddr = 0x20000;
    r.alertToken = 6;
    r.qpMtu = 3;
    clc::Confirm c;
    c.version = clc::kVersion1;
    c.firstContact = true;
    c.path = r;
    ASSERT_TRUE(net::writeClc(p.client.get(), c, net::deadlineAfter(5s)));
    Result<clc::Message> declined = net::readClc(p.client.get(), net::deadlineAfter(10s));
    Result<net::Outcome> out = result.get();
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(std::get<net::Fallback>(*out).reason, clc::DeclineCode::TimeoutCl);
    ASSERT_TRUE(declined && std::holds_alternative<clc::Decline>(*declined));
    EXPECT_EQ(std::get<clc::Decline>(*declined).diagnosis, clc::DeclineCode::TimeoutCl);
    EXPECT_TRUE(eventually([&] { return server->smcr()->groups->groups().empty(); }));
    EXPECT_TRUE(eventually([&] { return f.serverReg.live() == 0; })) << f.serverReg.live();
    expectBytesBothWays(p.client.get(), p.server.get());
}

} // namespace
} // namespace smc
