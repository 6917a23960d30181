// SPDX-License-Identifier: MIT
// SMC-R handshakes against a crafted peer over raw TCP: malformed CLC, failed first contacts
// that leave nothing behind, declines and CONFIRM_LINK timeouts with their fallback, and the
// SMC-Rv2 terms (the kernel's own PROPOSAL among them).
#include "smc/handshake/handshake.h"

#include <cstring>
#include <future>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "smc/net/clc_io.h"
#include "smc/socket/socket.h"
#include "smc/stack/stack_smcr.h"
#include "tests/libtest/clc_golden.h"
#include "tests/libtest/smcr_stacks.h"

namespace smc
{
namespace
{

using namespace test::smcr_stacks;

// The SMC-R part of a crafted ACCEPT or CONFIRM for `link` (the crafted peer's end).
clc::SmcrAcceptConfirm fakePath(const NewLink& link, const SystemId& id, std::uint32_t rkey,
                                std::uint64_t rmbAddr, std::uint32_t alertToken)
{
    clc::SmcrAcceptConfirm r;
    r.systemId = id;
    r.gid = link.local.gid;
    r.qpn = link.local.qpn;
    r.rkey = rkey;
    r.rmbAddr = rmbAddr;
    r.alertToken = alertToken;
    r.qpMtu = 3;
    return r;
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
            return net::serverHandshake(coreOf(*server), p.server.get(), smcrOnly());
        });
        // The first proposes from the real client's device, so it joins.
        ASSERT_TRUE(net::writeClc(p.client.get(),
                                  fakeProposal(p.client.get(), id, coreOf(*client).smcr()->gid,
                                               coreOf(*client).smcr()->mac),
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
    EXPECT_TRUE(eventually([&] { return coreOf(*server).smcr()->groups->groups().size() == 1; }));
    EXPECT_EQ(&*coreOf(*server).smcr()->groups->groups().front(), &group);
}

// A peer that proposes the real client's system id, GID and MAC joins its group and then
// declines "out of sync": the server believes it only if the group's links do not answer.
// `silent`: the real client's link ends drop everything from the ACCEPT on (it really lost
// the group).
void outOfSyncClaim(bool silent)
{
    Fabric f;
    auto server = makeStack(&f, kServerId, 255, 200ms);
    auto client = makeStack(&f, kClientId, 255, 200ms);
    TcpPair real = tcpPair();
    Both b = handshake(*server, *client, real);
    ASSERT_TRUE(smcr(b.server) && smcr(b.client));
    std::shared_ptr<LinkGroup> group = smcr(b.server)->group;

    TcpPair p = tcpPair();
    auto result = std::async(std::launch::async, [&] {
        return net::serverHandshake(coreOf(*server), p.server.get(), smcrOnly());
    });
    ASSERT_TRUE(net::writeClc(p.client.get(),
                              fakeProposal(p.client.get(), kClientId, coreOf(*client).smcr()->gid,
                                           coreOf(*client).smcr()->mac),
                              net::deadlineAfter(5s)));
    Result<clc::Message> accept = net::readClc(p.client.get(), net::deadlineAfter(10s));
    ASSERT_TRUE(accept && std::holds_alternative<clc::Accept>(*accept));
    EXPECT_FALSE(std::get<clc::Accept>(*accept).firstContact); // a join of the real group
    if (silent)
        for (std::uint32_t qpn = 0; qpn <= f.fabric.lastQpn(); ++qpn)
            try {
                f.fabric.channel(qpn + 0x10000)->faults().drop = 1 << 20;
            } catch (const std::out_of_range&) { // not a link of the group
            }
    clc::Decline d = clc::makeDecline(clc::DeclineCode::SyncErr, clc::kVersion1, kClientId);
    d.outOfSync = true;
    ASSERT_TRUE(net::writeClc(p.client.get(), d, net::deadlineAfter(5s)));
    Result<net::Outcome> r = result.get();
    ASSERT_TRUE(r && std::holds_alternative<net::Fallback>(*r));
    if (silent) {
        EXPECT_TRUE(eventually([&] { return coreOf(*server).smcr()->groups->groups().empty(); }))
            << "a group whose peer is gone lives on";
        return;
    }
    std::this_thread::sleep_for(800ms); // the probe's wait (200 ms) is over
    ASSERT_EQ(coreOf(*server).smcr()->groups->groups().size(), 1u) << "a stranger ended the group";
    EXPECT_EQ(&*coreOf(*server).smcr()->groups->groups().front(), group.get());
    EXPECT_GE(group->activeLinks(), 1u);
    EXPECT_EQ(group->connectionCount(), 1u); // the real connection, still there
}

TEST(SmcrHandshake, AnOutOfSyncClaimEndsNoGroupWhosePeerAnswers)
{
    outOfSyncClaim(false);
}

TEST(SmcrHandshake, AnOutOfSyncClaimEndsAGroupWhosePeerIsGone)
{
    outOfSyncClaim(true);
}

// Strangers that propose first contacts and then never CONFIRM hold up no other peer's
// handshake: a real client gets its first contact, then a join, while they wait.
TEST(SmcrHandshake, SilentFirstContactsHoldUpNoOtherPeer)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    SocketOptions slow = smcrOnly();
    slow.clcTimeout = 3s;
    std::vector<TcpPair> strangers;
    std::vector<std::future<Result<net::Outcome>>> waiting;
    for (std::uint8_t i = 0; i < 3; ++i) {
        strangers.push_back(tcpPair());
        TcpPair& p = strangers.back();
        waiting.push_back(std::async(std::launch::async, [&, fd = p.server.get()] {
            return net::serverHandshake(coreOf(*server), fd, slow);
        }));
        ASSERT_TRUE(net::writeClc(p.client.get(),
                                  fakeProposal(p.client.get(), SystemId{9, 9, 9, 9, 9, 9, 9, i}),
                                  net::deadlineAfter(5s)));
        Result<clc::Message> accept = net::readClc(p.client.get(), net::deadlineAfter(10s));
        ASSERT_TRUE(accept) << i << ": " << accept.error().message(); // before: only the first
    }
    SocketOptions quick = smcrOnly();
    quick.clcTimeout = 1s; // before, the server's one lock was the strangers' for 3 s
    for (int round = 0; round < 2; ++round) {
        TcpPair real = tcpPair();
        Both b = handshake(*server, *client, real, smcrOnly(), quick);
        ASSERT_TRUE(smcr(b.client))
            << round << ": " << (b.client ? "" : b.client.error().message());
        ASSERT_TRUE(smcr(b.server)) << round;
        EXPECT_EQ(smcr(b.server)->firstContact, round == 0);
    }
    for (auto& w : waiting)
        EXPECT_FALSE(w.get()); // their CONFIRM never came
}

// A raw TCP connection to `port` on loopback.
UniqueFd connectTo(std::uint16_t port)
{
    auto to = net::resolve("127.0.0.1", port, false).value();
    return std::move(net::connectTcp(to, net::deadlineAfter(5s))).value();
}

// A stranger's first contact as `id`, GID `gid` and MAC `mac`, to the ACCEPT (then it stalls).
void proposeAndStall(int fd, const SystemId& id,
                     const Gid& gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9},
                     const Mac& mac = {})
{
    ASSERT_TRUE(net::writeClc(fd, fakeProposal(fd, id, gid, mac), net::deadlineAfter(5s)));
    Result<clc::Message> accept = net::readClc(fd, net::deadlineAfter(10s));
    ASSERT_TRUE(accept && std::holds_alternative<clc::Accept>(*accept));
    EXPECT_TRUE(std::get<clc::Accept>(*accept).firstContact);
}

void expectRoundTrip(Socket& a, Socket& b)
{
    const std::array<std::byte, 3> hi{std::byte{1}, std::byte{2}, std::byte{3}};
    ASSERT_EQ(a.send(hi).value(), 3u);
    std::array<std::byte, 3> got{};
    for (std::size_t have = 0; have < got.size();) {
        Result<std::size_t> n = b.recv(std::span(got).subspan(have));
        ASSERT_TRUE(n && *n > 0);
        have += *n;
    }
    EXPECT_EQ(got, hi);
}

// Strangers that take our ACCEPT and never CONFIRM hold no handshake thread (the CONFIRM is
// awaited on the epoll thread): with one thread and three of them, a real client still gets
// SMC-R at once, then a join, and each stranger's handshake ends at the server's CLC timeout.
TEST(SmcrHandshake, SilentClientsHoldNoHandshakeThread)
{
    Fabric f;
    auto server = makeStack(&f, kServerId, 255, 0ms, false, 1);
    auto client = makeStack(&f, kClientId);
    SocketOptions o = smcrOnly();
    o.clcTimeout = 3s;
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0, o)).value();
    std::vector<UniqueFd> strangers;
    for (std::uint8_t i = 0; i < 3; ++i) {
        strangers.push_back(connectTo(l.port()));
        ASSERT_NO_FATAL_FAILURE(
            proposeAndStall(strangers.back().get(), SystemId{9, 9, 9, 9, 9, 9, 9, i}));
    }
    SocketOptions quick = smcrOnly();
    quick.clcTimeout = 1s; // before, the one thread waited 3 s for each stranger's CONFIRM
    for (int round = 0; round < 2; ++round) {
        Result<Socket> c = Socket::connect(*client, "127.0.0.1", l.port(), quick);
        ASSERT_TRUE(c) << round << ": " << c.error().message();
        EXPECT_EQ(c->transport(), Transport::SmcR) << round;
        Result<Socket> s = l.accept(5s);
        ASSERT_TRUE(s) << s.error().message();
        ASSERT_NO_FATAL_FAILURE(expectRoundTrip(*c, *s));
    }
    EXPECT_TRUE(eventually([&] { return server->stats().handshakeErrors == 3; }));
    EXPECT_TRUE(eventually([&] { return coreOf(*server).smcr()->groups->groups().size() == 1; }));
}

// A stranger that proposes a real client's identity as a first contact and stalls holds up
// that client's handshakes only briefly: parked behind it, they are declined (PEERNOSMC) after
// a sixth of the server's CLC timeout and go on as TCP, where before they waited for the whole
// of it and timed out. Once the stranger is gone, SMC-R again.
TEST(SmcrHandshake, AStrangerClaimingAPeerCostsItSmcNotItsConnections)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    auto client = makeStack(&f, kClientId);
    SocketOptions o = smcrOnly();
    o.clcTimeout = 6s;
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0, o)).value();
    UniqueFd stranger = connectTo(l.port());
    ASSERT_NO_FATAL_FAILURE(proposeAndStall(stranger.get(), kClientId, coreOf(*client).smcr()->gid,
                                            coreOf(*client).smcr()->mac));

    SocketOptions quick = smcrOnly();
    quick.clcTimeout = 3s;
    Result<Socket> c = Socket::connect(*client, "127.0.0.1", l.port(), quick);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->transport(), Transport::Tcp);
    EXPECT_EQ(c->fallbackReason(), clc::DeclineCode::PeerNoSmc);
    Result<Socket> s = l.accept(5s);
    ASSERT_TRUE(s) << s.error().message();
    ASSERT_NO_FATAL_FAILURE(expectRoundTrip(*c, *s));

    stranger.reset(); // its first contact fails, and its group goes
    EXPECT_TRUE(eventually([&] {
        Result<Socket> again = Socket::connect(*client, "127.0.0.1", l.port(), quick);
        Result<Socket> acc = l.accept(5s);
        return again && acc && again->transport() == Transport::SmcR;
    }));
}

// A burst of connections from one new peer: the first makes the group, the others wait
// parked for it (no thread each) and join it.
TEST(SmcrHandshake, ABurstFromANewPeerMakesOneGroup)
{
    Fabric f;
    auto server = makeStack(&f, kServerId, 255, 0ms, false, 2);
    auto client = makeStack(&f, kClientId);
    Listener l = std::move(Listener::listen(*server, "127.0.0.1", 0, smcrOnly())).value();
    constexpr int kClients = 6;
    std::vector<std::future<Result<Socket>>> connects;
    for (int i = 0; i < kClients; ++i)
        connects.push_back(std::async(std::launch::async, [&] {
            return Socket::connect(*client, "127.0.0.1", l.port(), smcrOnly());
        }));
    std::vector<Socket> clients; // open: a closed one's server end is dropped, not accepted
    for (int i = 0; i < kClients; ++i) {
        Result<Socket> c = connects[i].get();
        ASSERT_TRUE(c) << i << ": " << c.error().message();
        EXPECT_EQ(c->transport(), Transport::SmcR) << i;
        clients.push_back(std::move(*c));
        Result<Socket> s = l.accept(5s);
        ASSERT_TRUE(s) << s.error().message();
        EXPECT_EQ(s->transport(), Transport::SmcR) << i;
    }
    EXPECT_EQ(coreOf(*server).smcr()->groups->groups().size(), 1u);
    EXPECT_EQ(coreOf(*client).smcr()->groups->groups().size(), 1u);
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
            return net::serverHandshake(coreOf(*server), p.server.get(), smcrOnly());
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
        EXPECT_LE(coreOf(*server).smcr()->groups->groups().size(), 1u) << i;
    }
    EXPECT_TRUE(eventually([&] { return coreOf(*server).smcr()->groups->groups().empty(); }));
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
    Result<net::Outcome> r = net::clientHandshake(coreOf(client), p.client.get(), smcrOnly());
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
    EXPECT_TRUE(coreOf(*client).smcr()->groups->groups().empty());
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
    const clc::SmcrAcceptConfirm r = fakePath(*link, kServerId, 77, 0x10000, 5);
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
    EXPECT_TRUE(eventually([&] { return coreOf(*client).smcr()->groups->groups().empty(); }));
    EXPECT_TRUE(eventually([&] { return f.clientReg.live() == 0; })) << f.clientReg.live();
}

// The fake client joins the server's link and sends CONFIRM, then never answers CONFIRM_LINK.
TEST(SmcrHandshake, NoConfirmLinkAnswerIsTimeoutClOnTheServer)
{
    Fabric f;
    auto server = makeStack(&f, kServerId, 255, 200ms);
    TcpPair p = tcpPair();
    auto result = std::async(std::launch::async, [&] {
        return net::serverHandshake(coreOf(*server), p.server.get(), smcrOnly());
    });
    ASSERT_TRUE(net::writeClc(p.client.get(), fakeProposal(p.client.get(), kClientId),
                              net::deadlineAfter(5s)));
    Result<clc::Message> accept = net::readClc(p.client.get(), net::deadlineAfter(10s));
    ASSERT_TRUE(accept && std::holds_alternative<clc::Accept>(*accept));
    const auto& sa = std::get<clc::SmcrAcceptConfirm>(std::get<clc::Accept>(*accept).path);
    Result<NewLink> link = f.fabric.join({sa.qpn, sa.psn, sa.gid, sa.mac, sa.qpMtu}, {});
    ASSERT_TRUE(link);
    const clc::SmcrAcceptConfirm r = fakePath(*link, kClientId, 88, 0x20000, 6);
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
    EXPECT_TRUE(eventually([&] { return coreOf(*server).smcr()->groups->groups().empty(); }));
    EXPECT_TRUE(eventually([&] { return f.serverReg.live() == 0; })) << f.serverReg.live();
    expectBytesBothWays(p.client.get(), p.server.get());
}

// A PROPOSAL shaped as Linux 6.12's SMC-Rv2-only one (system id, v1 GID and MAC zero) from
// the fabric's client device, with the stacks' EID.
clc::Proposal kernelLikeProposal()
{
    clc::Proposal p;
    p.version = clc::kVersion2;
    p.typeV1 = clc::SmcType::None;
    p.typeV2 = clc::SmcType::SmcR;
    p.v2.release = clc::kRelease1;
    p.v2.userEids = {*clc::makeEid("SMC-CORE-LOOPBACK")};
    p.v2.roceV2Gid = InprocFabric::clientGid();
    p.v2.maxConns = 200;
    p.v2.maxLinks = 2;
    p.v2.featureMask = clc::kFeatureEmulatedIsm;
    return p;
}

// The server reads the bytes Linux 6.12 sent and declines with a reason: the kernel's GID
// (192.0.2.1) is in no subnet of this connection's interface, so no direct route.
TEST(SmcrHandshake, TheProposalOfLinux612FromAnotherSubnetIsNoRoute)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    TcpPair p = tcpPair();
    auto result = std::async(std::launch::async, [&] {
        return net::serverHandshake(coreOf(*server), p.server.get(), smcrOnly());
    });
    ASSERT_TRUE(net::writeAll(p.client.get(), testing::linux612Proposal(), net::deadlineAfter(5s)));
    Result<clc::Message> answer = net::readClc(p.client.get(), net::deadlineAfter(10s));
    ASSERT_TRUE(answer && std::holds_alternative<clc::Decline>(*answer));
    EXPECT_EQ(std::get<clc::Decline>(*answer).diagnosis, clc::DeclineCode::NoRoute);
    EXPECT_EQ(std::get<clc::Decline>(*answer).version, clc::kVersion2);
    Result<net::Outcome> out = result.get();
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(std::get<net::Fallback>(*out).reason, clc::DeclineCode::NoRoute);
    EXPECT_TRUE(coreOf(*server).smcr()->groups->groups().empty());
}

// The v2 ACCEPT carries Linux's first-contact terms: a direct route, release 1, the smaller
// max conns and max links. A CONFIRM that does not echo them is declined as Linux's server
// does (MAXLINKERR here), and the group goes.
TEST(SmcrHandshake, AV2ConfirmThatChangesTheTermsIsDeclined)
{
    Fabric f;
    auto server = makeStack(&f, kServerId);
    TcpPair p = tcpPair();
    auto result = std::async(std::launch::async, [&] {
        return net::serverHandshake(coreOf(*server), p.server.get(), smcrOnly());
    });
    ASSERT_TRUE(net::writeClc(p.client.get(), kernelLikeProposal(), net::deadlineAfter(5s)));
    Result<clc::Message> answer = net::readClc(p.client.get(), net::deadlineAfter(10s));
    ASSERT_TRUE(answer && std::holds_alternative<clc::Accept>(*answer));
    const auto& accept = std::get<clc::Accept>(*answer);
    EXPECT_EQ(accept.version, clc::kVersion2);
    ASSERT_TRUE(accept.firstContact);
    EXPECT_TRUE(accept.fce.v2Direct);
    EXPECT_EQ(accept.fce.release, clc::kRelease1);
    EXPECT_EQ(accept.fce.maxConns, 200u);
    EXPECT_EQ(accept.fce.maxLinks, 2u);
    EXPECT_EQ(accept.fce.featureMask, clc::kFeatureEmulatedIsm);
    EXPECT_NE(accept.fce.hostname, clc::Hostname{});
    const auto& sa = std::get<clc::SmcrAcceptConfirm>(accept.path);
    EXPECT_EQ(sa.eid, *clc::makeEid("SMC-CORE-LOOPBACK"));
    EXPECT_NE(sa.mac, clc::Mac{}); // the kernel client's dmac for the link
    Result<NewLink> link = f.fabric.join({sa.qpn, sa.psn, sa.gid, sa.mac, sa.qpMtu}, {});
    ASSERT_TRUE(link);
    clc::SmcrAcceptConfirm r = fakePath(*link, {}, 88, 0x20000, 6);
    r.eid = sa.eid;
    r.gidList = {link->local.gid};
    clc::Confirm c;
    c.version = clc::kVersion2;
    c.firstContact = true;
    c.path = r;
    c.fce = accept.fce;
    c.fce.maxLinks = 1;
    ASSERT_TRUE(net::writeClc(p.client.get(), c, net::deadlineAfter(5s)));
    Result<clc::Message> declined = net::readClc(p.client.get(), net::deadlineAfter(10s));
    ASSERT_TRUE(declined && std::holds_alternative<clc::Decline>(*declined));
    EXPECT_EQ(std::get<clc::Decline>(*declined).diagnosis, clc::DeclineCode::MaxLinkErr);
    Result<net::Outcome> out = result.get();
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(std::get<net::Fallback>(*out).reason, clc::DeclineCode::MaxLinkErr);
    EXPECT_TRUE(eventually([&] { return coreOf(*server).smcr()->groups->groups().empty(); }));
}

// Our client takes a v2 first contact only on its own terms (Linux's client checks): a direct
// route and no more links than it proposed.
TEST(SmcrHandshake, AV2AcceptOutsideOurTermsIsDeclined)
{
    Fabric f;
    auto client = makeStack(&f, kClientId, 255, 0ms, true);
    Result<NewLink> link = f.fabric.create({});
    ASSERT_TRUE(link);
    struct Case {
        bool direct;
        std::uint8_t maxLinks;
        clc::DeclineCode reason;
    };
    for (const Case& k : {Case{false, 1, clc::DeclineCode::NoIndirect},
                          Case{true, 3, clc::DeclineCode::MaxLinkErr}}) {
        clc::SmcrAcceptConfirm r = fakePath(*link, kServerId, 77, 0x10000, 5);
        r.eid = *clc::makeEid("SMC-CORE-LOOPBACK");
        clc::Accept a;
        a.version = clc::kVersion2;
        a.firstContact = true;
        a.path = r;
        a.fce.v2Direct = k.direct;
        a.fce.release = clc::kRelease1;
        a.fce.maxConns = 255;
        a.fce.maxLinks = k.maxLinks;
        Result<clc::Message> answer = std::make_error_code(std::errc::io_error);
        Result<net::Outcome> out = clientAgainst(
            *client, [&](int fd) { ASSERT_TRUE(net::writeClc(fd, a, net::deadlineAfter(5s))); },
            &answer);
        ASSERT_TRUE(out) << out.error().message();
        EXPECT_EQ(std::get<net::Fallback>(*out).reason, k.reason);
        ASSERT_TRUE(answer && std::holds_alternative<clc::Decline>(*answer));
        EXPECT_EQ(std::get<clc::Decline>(*answer).diagnosis, k.reason);
        EXPECT_TRUE(coreOf(*client).smcr()->groups->groups().empty());
    }
}

} // namespace
} // namespace smc
