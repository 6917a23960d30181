// SPDX-License-Identifier: MIT
// Two link groups (server and client) over in-process links: first link, ADD_LINK with the
// ADD_LINK_CONT rkey exchange, failover, orderly delete, TEST_LINK, RKEY flows, faults.
#include "smc/core/link_group.h"
#include "smc/core/link_group_manager.h"
#include "smc/llc/link_errors.h"
#include "smc/testing/inproc_fabric.h"

#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "tests/libtest/link_groups.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

// An in-process pair with the limits, timeouts and idle delays these tests vary.
struct Pair : test::GroupPair {
    explicit Pair(unsigned maxLinks = 2, LlcTimeouts timeouts = fastTimeouts())
        : Pair(limits(maxLinks, 255), limits(maxLinks, 255), timeouts)
    {
    }
    Pair(std::pair<unsigned, unsigned> serverLimits, std::pair<unsigned, unsigned> clientLimits,
         LlcTimeouts timeouts = fastTimeouts(),
         std::pair<std::chrono::milliseconds, std::chrono::milliseconds> idleFree = {})
    {
        LinkGroupConfig serverConfig, clientConfig;
        std::tie(serverConfig.maxLinks, serverConfig.maxConns) = serverLimits;
        std::tie(clientConfig.maxLinks, clientConfig.maxConns) = clientLimits;
        serverConfig.timeouts = clientConfig.timeouts = timeouts;
        serverConfig.idleFree = idleFree.first;
        clientConfig.idleFree = idleFree.second;
        Result<void> created = create(serverConfig, clientConfig);
        EXPECT_TRUE(created) << created.error().message(); // and start() stops the test
    }

    static std::pair<unsigned, unsigned> limits(unsigned links, unsigned conns)
    {
        return {links, conns};
    }

    static LlcTimeouts fastTimeouts()
    {
        LlcTimeouts t;
        t.firstLink = 2s;
        t.wait = 1s;
        t.flowStart = 5s;
        t.testLink = 0ms;
        return t;
    }

    // Hides GroupPair::start(): the first link, or the test fails.
    void start() { test::start(*this); }

    ConnectionPair connect() { return test::handshake(*server.group, *client.group); }
};

TEST(LinkGroup, FirstLinkThenASecondSymmetricLink)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    EXPECT_EQ(p.server.group->activeLinks(), 2u);
    EXPECT_EQ(p.server.group->type(), GroupType::Symmetric);
    EXPECT_EQ(p.client.group->type(), GroupType::Symmetric);
    std::vector<std::uint8_t> sIds, cIds;
    for (const LinkInfo& l : p.server.group->links())
        sIds.push_back(l.linkId);
    for (const LinkInfo& l : p.client.group->links())
        cIds.push_back(l.linkId);
    EXPECT_EQ(sIds, cIds) << "the client adopts the server's link numbers";
}

// CONFIRM_LINK carries each side's max links and max conns; both keep the
// smaller, so a client that wants one link never gets a second one offered.
TEST(LinkGroup, ConfirmLinkNegotiatesTheSmallerLimits)
{
    Pair p(Pair::limits(2, 255), Pair::limits(1, 32));
    ASSERT_NO_FATAL_FAILURE(p.start());
    for (LinkGroup* g : {p.server.group.get(), p.client.group.get()}) {
        EXPECT_EQ(g->maxLinks(), 1u);
        EXPECT_EQ(g->maxConns(), 32u);
    }
    EXPECT_EQ(p.server.group->addLink().error(), LinkErrc::NoLinkRoom) << "no room for a 2nd link";
    EXPECT_EQ(p.server.group->links().size(), 1u);
    EXPECT_EQ(p.server.group->type(), GroupType::Single);
    for (int i = 0; i < 32; ++i)
        ASSERT_TRUE(p.connect().first);
    EXPECT_FALSE(p.server.group->hasRoom()) << "the client's 32 is the group's limit";
    EXPECT_FALSE(p.client.group->hasRoom());
}

// Linux frees a link group that has had no connection for a while; the
// server's timer is the shorter one, and its DELETE_LINK ALL ends the client's.
TEST(LinkGroup, AnIdleGroupIsFreedAfterTheDelay)
{
    Pair p(Pair::limits(2, 255), Pair::limits(2, 255), Pair::fastTimeouts(), {500ms, 5000ms});
    ASSERT_NO_FATAL_FAILURE(p.start());
    auto [sc, cc] = p.connect();
    ASSERT_TRUE(sc && cc);
    std::this_thread::sleep_for(800ms);
    EXPECT_EQ(p.server.terminations.load(), 0) << "a group with a connection is not idle";
    ASSERT_TRUE(p.client.group->closeConnection(*cc));
    ASSERT_TRUE(p.server.group->closeConnection(*sc));
    ASSERT_TRUE(test::eventually([&] { return p.client.terminations.load() == 1; }, 4000ms))
        << "the server's timer (0.5 s) ends the group long before the client's (5 s)";
    ASSERT_TRUE(test::eventually([&] { return p.server.terminations.load() == 1; }));
    EXPECT_NE(p.server.reason.find("idle"), std::string::npos) << p.server.reason;
    EXPECT_NE(p.client.reason.find("peer deleted"), std::string::npos) << p.client.reason;
    EXPECT_FALSE(p.server.group->openConnection(16384, 16384)) << "a freed group takes nothing";
}

// A destroyed group's idle timer (600 s, 610 s) goes with it: the executor
// keeps neither its task nor its queue's memory until the timer is due.
TEST(LinkGroup, ADestroyedGroupLeavesNoIdleTimerBehind)
{
    Executor executor({2, 64, 1000ms});
    const std::size_t before = executor.pendingTimers();
    {
        test::GroupPair p;
        LinkGroupConfig config;
        config.maxLinks = 1;
        config.timeouts = Pair::fastTimeouts();
        config.executor = &executor;
        Result<void> created = p.create(config);
        ASSERT_TRUE(created) << created.error().message();
        ASSERT_NO_FATAL_FAILURE(test::start(p));
        EXPECT_GE(executor.pendingTimers(), before + 2) << "each side's idle timer";
    }
    EXPECT_EQ(executor.pendingTimers(), before) << "timers of destroyed groups linger";
}

// REQ_ADD_LINK: the client asks, the server runs its ADD_LINK flow (with
// every RMB's rkeys), or declines when it cannot make a link.
TEST(LinkGroup, ClientAsksForALinkWithReqAddLink)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    EXPECT_EQ(p.client.group->requestAddLink().error(), LinkErrc::NoLinkRoom) << "at max links";
    EXPECT_EQ(p.server.group->requestAddLink().error(), LinkErrc::WrongRole);
    ASSERT_TRUE(p.server.group->deleteLink(p.server.group->links().back().slot));
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 1; }));
    std::vector<ConnectionPair> conns;
    for (int i = 0; i < 5; ++i)
        conns.push_back(p.connect());

    p.fabric().refuseCreates = 1;
    Result<void> declined = p.client.group->requestAddLink();
    ASSERT_FALSE(declined);
    EXPECT_EQ(declined.error(), std::errc::connection_refused) << declined.error().message();
    EXPECT_EQ(p.server.group->activeLinks(), 1u);

    Result<void> added = p.client.group->requestAddLink();
    ASSERT_TRUE(added) << added.error().message();
    EXPECT_EQ(p.client.group->activeLinks(), 2u);
    ASSERT_TRUE(test::eventually([&] { return p.server.group->activeLinks() == 2; }));
    test::expectRtokensAgree(*p.server.group, *p.client.group, conns);
}

// Linux's device rules for a second link: neither side with a second device,
// no second link; one side with one, an asymmetric link (in the last slot)
// until a symmetric one can be had, which then replaces it.
TEST(LinkGroup, NoSecondDeviceOnEitherSideStaysSingle)
{
    Pair p;
    p.fabric().serverDevices = 1;
    p.fabric().clientDevices = 1;
    ASSERT_NO_FATAL_FAILURE(p.start());
    EXPECT_EQ(p.server.group->addLink().error(), std::errc::connection_refused)
        << "the client rejects: no alternate path";
    for (LinkGroup* g : {p.server.group.get(), p.client.group.get()}) {
        EXPECT_EQ(g->links().size(), 1u);
        EXPECT_EQ(g->type(), GroupType::Single);
    }
}

void asymmetricThenSymmetric(bool serverHasOneDevice)
{
    Pair p;
    (serverHasOneDevice ? p.fabric().serverDevices : p.fabric().clientDevices) = 1;
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(waitForLinks(*p.server.group, *p.client.group, 2, 5s));
    const GroupType local = GroupType::AsymmetricLocal, peer = GroupType::AsymmetricPeer;
    EXPECT_EQ(p.server.group->type(), serverHasOneDevice ? local : peer);
    EXPECT_EQ(p.client.group->type(), serverHasOneDevice ? peer : local);
    const LinkGroup& asymLocal = serverHasOneDevice ? *p.server.group : *p.client.group;
    EXPECT_EQ(asymLocal.links().back().slot, kMaxLinks - 1) << "asymmetric: the last slot";
    std::vector<ConnectionPair> conns;
    for (int i = 0; i < 4; ++i)
        conns.push_back(p.connect());
    // An asymmetric group takes only a symmetric link: the server finds no
    // alternate device itself, or the client finds none and rejects.
    const std::error_code noSymmetric = serverHasOneDevice
                                            ? make_error_code(LinkErrc::NoLinkRoom)
                                            : std::make_error_code(std::errc::connection_refused);
    EXPECT_EQ(p.server.group->addLink().error(), noSymmetric);
    EXPECT_EQ(p.server.group->links().size(), 2u);

    (serverHasOneDevice ? p.fabric().serverDevices : p.fabric().clientDevices) = 2;
    ASSERT_TRUE(p.server.group->addLink());
    ASSERT_TRUE(waitForLinks(*p.server.group, *p.client.group, 2, 5s))
        << "the asymmetric link is deleted once a symmetric pair exists";
    EXPECT_EQ(p.server.group->type(), GroupType::Symmetric);
    EXPECT_EQ(p.client.group->type(), GroupType::Symmetric);
    test::expectRtokensAgree(*p.server.group, *p.client.group, conns);
    for (auto [sc, cc] : conns) {
        EXPECT_TRUE(test::writeToPeer(*p.server.group, *sc, *cc, 1));
        EXPECT_TRUE(test::writeToPeer(*p.client.group, *cc, *sc, 2));
    }
    EXPECT_EQ(p.server.terminations.load() + p.client.terminations.load(), 0);
}

TEST(LinkGroup, ServerWithOneDeviceGetsAsymmetricLocal)
{
    asymmetricThenSymmetric(true);
}

TEST(LinkGroup, ClientWithOneDeviceGetsAsymmetricLocal)
{
    asymmetricThenSymmetric(false);
}

TEST(LinkGroup, AddLinkExchangesEveryRmbsRkeys)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    // Back to one link, open connections, then add a link: ADD_LINK_CONT
    // must carry all of them (more than two per message, both directions).
    const unsigned second = p.server.group->links().back().slot;
    ASSERT_TRUE(p.server.group->deleteLink(second));
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 1; }));
    std::vector<ConnectionPair> conns;
    for (int i = 0; i < 7; ++i)
        conns.push_back(p.connect());
    ASSERT_TRUE(p.server.group->addLink());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));

    // Every peer RMB is reachable on both links, on both sides, with the
    // rkeys its owner registered there: the rtoken tables agree.
    test::expectRtokensAgree(*p.server.group, *p.client.group, conns);
}

TEST(LinkGroup, ConnectionsSpreadAndSurviveALinkKill)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    std::vector<ConnectionPair> conns;
    for (int i = 0; i < 10; ++i)
        conns.push_back(p.connect());
    for (const LinkInfo& l : p.server.group->links())
        EXPECT_EQ(l.connections, 5u) << "least loaded link first";
    for (auto [sc, cc] : conns) {
        ASSERT_TRUE(test::writeToPeer(*p.server.group, *sc, *cc, 1)) << "before";
        ASSERT_TRUE(test::writeToPeer(*p.client.group, *cc, *sc, 2));
    }

    p.fabric().channel(p.fabric().lastQpn())->shutdown(); // the second link dies
    ASSERT_TRUE(test::eventually(
        [&] { return p.server.group->activeLinks() == 1 && p.client.group->activeLinks() == 1; }));
    EXPECT_EQ(p.server.group->type(), GroupType::Single);
    const unsigned survivor = p.server.group->links().front().slot;
    for (auto [sc, cc] : conns) {
        EXPECT_EQ(sc->link(), survivor);
        EXPECT_TRUE(test::writeToPeer(*p.server.group, *sc, *cc, 3)) << "after failover";
        EXPECT_TRUE(test::writeToPeer(*p.client.group, *cc, *sc, 4));
    }
    EXPECT_EQ(p.server.group->connectionCount(), 10u);
    EXPECT_EQ(p.server.terminations.load() + p.client.terminations.load(), 0);
}

TEST(LinkGroup, LastLinkGoneTerminatesAndReleasesEverything)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    for (int i = 0; i < 3; ++i)
        p.connect();
    p.fabric().channel(p.fabric().lastQpn())->shutdown();
    ASSERT_TRUE(test::eventually(
        [&] { return p.server.terminations.load() == 1 && p.client.terminations.load() == 1; }));
    EXPECT_EQ(p.server.group->connectionCount(), 0u);
    EXPECT_EQ(p.server.group->pool().stats().rmb.inUseBytes, 0) << "every buffer back";
    EXPECT_EQ(p.client.group->pool().stats().sndbuf.inUseBytes, 0);
    EXPECT_NE(p.server.reason.find("last link"), std::string::npos) << p.server.reason;
}

TEST(LinkGroup, OrderlyDeleteKeepsConnections)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    auto [sc, cc] = p.connect();
    auto [sc2, cc2] = p.connect();
    ASSERT_TRUE(p.client.group->deleteLink(cc->link())) << "either side may delete";
    ASSERT_TRUE(test::eventually(
        [&] { return p.server.group->activeLinks() == 1 && p.client.group->activeLinks() == 1; }));
    for (auto [s, c] : {std::pair{sc, cc}, std::pair{sc2, cc2}}) {
        EXPECT_TRUE(test::writeToPeer(*p.server.group, *s, *c, 9));
        EXPECT_TRUE(test::writeToPeer(*p.client.group, *c, *s, 9));
    }
    EXPECT_EQ(p.server.group->deleteLink(2).error(), LinkErrc::NoSuchLink);
}

TEST(LinkGroup, MissedTestLinkTakesTheLinkDown)
{
    LlcTimeouts t = Pair::fastTimeouts();
    t.testLink = 100ms;
    t.wait = 300ms;
    Pair p(2, t);
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    p.connect();
    // The client's end of the second link stops answering (and sending).
    p.fabric().channel(p.fabric().lastQpn() + 0x10000)->faults().drop = 1 << 30;
    ASSERT_TRUE(test::eventually([&] { return p.server.group->activeLinks() == 1; }));
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 1; }));
    EXPECT_EQ(p.server.terminations.load(), 0);
    EXPECT_GE(p.server.group->stats().failovers, 1u);
}

// Connections come and go between link changes: after each change both
// sides settle, and every open connection's RMB stays reachable. (Link
// changes racing the handshake: HandshakesRaceLinkChanges.)
TEST(LinkGroup, RkeysFollowConnectionsAcrossLinkChanges)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    std::vector<ConnectionPair> open;
    for (int i = 0; i < 24; ++i) {
        auto pair = p.connect();
        ASSERT_TRUE(pair.first && pair.second);
        open.push_back(pair);
        if (i % 3 == 2) { // close the oldest: DELETE_RKEY on both sides
            auto [sc, cc] = open.front();
            open.erase(open.begin());
            ASSERT_TRUE(p.server.group->closeConnection(*sc));
            ASSERT_TRUE(p.client.group->closeConnection(*cc));
        }
        if (i % 4 == 3) { // and flip the second link
            const auto links = p.server.group->links();
            if (links.size() == 2)
                ASSERT_TRUE(p.server.group->deleteLink(links.back().slot));
            else
                ASSERT_TRUE(p.server.group->addLink());
            const unsigned want = links.size() == 2 ? 1 : 2;
            ASSERT_TRUE(test::eventually([&] {
                return p.client.group->activeLinks() == want &&
                       p.client.group->links().size() == want;
            }));
        }
    }
    EXPECT_EQ(p.server.group->rtokens().used(), open.size());
    EXPECT_EQ(p.client.group->rtokens().used(), open.size());
    for (auto [sc, cc] : open) {
        EXPECT_TRUE(test::writeToPeer(*p.server.group, *sc, *cc, 5));
        EXPECT_TRUE(test::writeToPeer(*p.client.group, *cc, *sc, 6));
    }
}

// Handshakes while another thread adds and deletes the second link: a
// handshake holds its group's flow from buffer registration to CONFIRM_RKEY,
// so the rtoken CLC gave is never for a link gone meanwhile, and every
// connection that opened can write on whatever link it ends up on.
TEST(LinkGroup, HandshakesRaceLinkChanges)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    std::atomic<bool> stop{false};
    std::atomic<unsigned> changes{0};
    std::thread churn([&] {
        while (!stop) {
            const auto links = p.server.group->links();
            const bool ok = links.size() == 2 ? bool(p.server.group->deleteLink(links.back().slot))
                                              : bool(p.server.group->addLink());
            changes += ok;
            std::this_thread::sleep_for(2ms);
        }
    });
    // Open connections until the links changed a dozen times, closing the
    // oldest beyond 32 (DELETE_RKEY races the link changes too).
    std::vector<ConnectionPair> open;
    unsigned opened = 0, failed = 0;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while ((changes < 12 || opened < 40) && std::chrono::steady_clock::now() < deadline) {
        // The CLC steps by hand: each side sends its RMB's rtoken at once,
        // and the network's round trips pass before the peer completes.
        Result<LinkGroup::Handshake> hs = p.server.group->beginHandshake(65536, 65536);
        if (!hs) {
            ++failed; // a flow timed out under churn: declined, nothing kept
            continue;
        }
        const RtokenTable::Rtoken serverRmb = hs->rtoken(); // in CLC ACCEPT
        const std::uint8_t linkId = p.server.group->linkId(hs->connection()->link());
        std::this_thread::sleep_for(1ms);
        Result<LinkGroup::Handshake> hc = p.client.group->beginHandshake(65536, 65536, linkId);
        if (!hc) {
            ++failed;
            continue;
        }
        const RtokenTable::Rtoken clientRmb = hc->rtoken(); // in CLC CONFIRM
        std::this_thread::sleep_for(1ms);
        ConnectionPtr sc = hs->connection();
        ConnectionPtr cc = hc->connection();
        if (!hs->complete(clientRmb, cc->rmb.size())) {
            ++failed;
            continue;
        }
        if (!hc->complete(serverRmb, sc->rmb.size())) {
            (void)p.server.group->closeConnection(*sc);
            ++failed;
            continue;
        }
        ++opened;
        open.push_back({sc, cc});
        if (open.size() > 32) {
            auto [oldS, oldC] = open.front();
            open.erase(open.begin());
            (void)p.server.group->closeConnection(*oldS);
            (void)p.client.group->closeConnection(*oldC);
        }
    }
    stop = true;
    churn.join();
    ASSERT_TRUE(test::eventually([&] {
        const unsigned n = p.server.group->activeLinks();
        return n == p.client.group->activeLinks() && p.server.group->links().size() == n &&
               p.client.group->links().size() == n;
    }));
    EXPECT_GE(changes.load(), 12u) << "the links did change meanwhile";
    EXPECT_GE(opened, 40u) << failed << " handshakes declined under churn";
    if (failed == 0) { // a declined one may leave a row whose DELETE_RKEY was lost
        EXPECT_EQ(p.server.group->rtokens().used(), open.size());
        EXPECT_EQ(p.client.group->rtokens().used(), open.size());
    }
    test::expectRtokensAgree(*p.server.group, *p.client.group, open);
    for (auto [sc, cc] : open) {
        EXPECT_TRUE(test::writeToPeer(*p.server.group, *sc, *cc, 7));
        EXPECT_TRUE(test::writeToPeer(*p.client.group, *cc, *sc, 8));
    }
    EXPECT_EQ(p.server.group->connectionCount(), open.size()) << "failed handshakes keep nothing";
    EXPECT_EQ(p.client.group->connectionCount(), open.size());
}

TEST(LinkGroup, MalformedMessageTerminatesWithAReason)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    p.connect();
    p.fabric().channel(p.fabric().lastQpn())->faults().corrupt = 1;
    // The server's next message carries the corruption: with one link no
    // CONFIRM_RKEY goes out, so it is the DELETE_RKEY of this close.
    auto [sc, cc] = p.connect();
    (void)p.server.group->closeConnection(*sc);
    ASSERT_TRUE(test::eventually([&] { return p.client.terminations.load() == 1; }));
    EXPECT_NE(p.client.reason.find("protocol violation"), std::string::npos) << p.client.reason;
    (void)cc;
}

// Every fault on the add-link flow: it completes, or both sides end with a
// consistent set of links. Never a hang, never a leak.
TEST(LinkGroup, FaultsDuringAddLinkNeverHangOrLeak)
{
    for (int fault = 0; fault < 4; ++fault) {
        Pair p(2);
        ASSERT_NO_FATAL_FAILURE(p.start());
        ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
        std::vector<ConnectionPair> conns;
        for (int i = 0; i < 3; ++i)
            conns.push_back(p.connect());
        ASSERT_TRUE(p.server.group->deleteLink(p.server.group->links().back().slot));
        ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 1; }));
        Faults& f = p.fabric().channel(100)->faults(); // the first link carries the flow
        switch (fault) {
        case 0:
            f.drop = 1;
            break;
        case 1:
            f.duplicate = 3;
            break;
        case 2:
            f.delayMs = 50;
            break;
        case 3:
            f.corrupt = 1;
            break;
        }
        const auto t0 = std::chrono::steady_clock::now();
        (void)p.server.group->addLink();
        f.delayMs = 0;
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s) << "fault " << fault;
        // Settled: both sides agree (or the group is gone on both sides).
        ASSERT_TRUE(test::eventually(
            [&] {
                // The handler runs once everything is released.
                if (p.server.group->terminated() || p.client.group->terminated())
                    return p.server.terminations.load() == 1 && p.client.terminations.load() == 1;
                return p.server.group->activeLinks() == p.client.group->activeLinks() &&
                       p.server.group->links().size() == p.server.group->activeLinks() &&
                       p.client.group->links().size() == p.client.group->activeLinks();
            },
            10s))
            << "fault " << fault;
        if (p.server.group->terminated()) {
            EXPECT_EQ(p.server.group->pool().stats().rmb.inUseBytes, 0);
            EXPECT_EQ(p.client.group->pool().stats().rmb.inUseBytes, 0);
        } else { // survived: the connections still reach each other
            test::expectRtokensAgree(*p.server.group, *p.client.group, conns);
            for (auto [sc, cc] : conns) {
                EXPECT_TRUE(test::writeToPeer(*p.server.group, *sc, *cc, 3)) << "fault " << fault;
                EXPECT_TRUE(test::writeToPeer(*p.client.group, *cc, *sc, 4)) << "fault " << fault;
            }
        }
    }
}

// 300 connections to one peer: the first group fills at its limit (255) and
// the managers open a second one, as Linux does.
TEST(LinkGroupManager, AFullGroupSendsTheNextConnectionToANewOne)
{
    InprocRegistrar serverKeys, clientKeys;
    InprocFabric fabric(serverKeys, clientKeys);
    LinkGroupConfig defaults;
    defaults.maxLinks = 1;
    defaults.timeouts = Pair::fastTimeouts();
    LinkGroupManager servers(defaults, fabric), clients(defaults, fabric);
    const SystemId serverId{1}, clientId{2};
    std::vector<ConnectionPair> conns;
    for (int i = 0; i < 300; ++i) {
        LinkGroup* s = servers.find(Role::Server, clientId);
        LinkGroup* c = clients.find(Role::Client, serverId);
        ASSERT_EQ(s == nullptr, c == nullptr) << "both sides agree on reuse";
        if (s == nullptr) {
            s = servers.create(Role::Server, clientId).value();
            c = clients.create(Role::Client, serverId).value();
            ASSERT_TRUE(startLocalPair(*s, *c, fabric));
        }
        Result<ConnectionPtr> sc = s->openConnection(16384, 16384);
        Result<ConnectionPtr> cc = c->openConnection(16384, 16384);
        ASSERT_TRUE(sc && cc) << i;
        conns.emplace_back(*sc, *cc);
    }
    const std::vector<LinkGroup*> groups = servers.groups();
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0]->connectionCount(), 255u);
    EXPECT_EQ(groups[1]->connectionCount(), 45u);
    EXPECT_EQ(clients.groups().size(), 2u);
    EXPECT_EQ(servers.find(Role::Client, clientId), nullptr) << "roles do not mix";
    groups[1]->terminate("test");
    EXPECT_EQ(servers.reap(), 1u);
    EXPECT_EQ(servers.groups().size(), 1u);
}

} // namespace
} // namespace smc
