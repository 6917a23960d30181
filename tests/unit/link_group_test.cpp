// SPDX-License-Identifier: MIT
// Two link groups (server and client) over in-process links, set up and run: first link and
// limits, ADD_LINK with the ADD_LINK_CONT rkey exchange, REQ_ADD_LINK, device rules, idle freeing,
// a malformed message, the manager. Link loss and churn: link_group_failover_test.cpp.
#include "smc/core/link_group.h"
#include "smc/core/link_group_manager.h"
#include "smc/llc/link_errors.h"
#include "smc/testing/inproc_fabric.h"

#include <thread>

#include <gtest/gtest.h>

#include "tests/libtest/hostile.h"
#include "tests/libtest/link_groups.h"
#include "tests/libtest/raw_peer.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using Pair = test::LinkGroupPair;

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

// An SMC-Rv2 group (Linux 6.12 as the peer) puts v2 headers on what it sends: its
// CONFIRM_LINK in either role, its TEST_LINKs and their answers, its DELETE_LINK.
TEST(LinkGroup, AV2GroupSendsV2Headers)
{
    for (Role role : {Role::Server, Role::Client}) {
        SCOPED_TRACE(role == Role::Server ? "server" : "client");
        LinkGroupConfig c = test::hostileConfig(role);
        c.llcVersion = 2;
        c.maxLinks = 1;
        c.timeouts.testLink = 50ms;
        test::RawPeer p(c);
        ASSERT_TRUE(p.start());
        EXPECT_EQ(p.confirmVersion(), 2);
        test::PeerEnd& peer = *p.end();
        std::optional<llc::Message> probe = peer.nextOf(llc::Type::TestLink, false);
        ASSERT_TRUE(probe);
        EXPECT_EQ(probe->version, 2);
        ASSERT_TRUE(peer.send({1, false, llc::TestLink{}}));
        std::optional<llc::Message> echo = peer.nextOf(llc::Type::TestLink, true);
        ASSERT_TRUE(echo);
        EXPECT_EQ(echo->version, 2);
        p.group().terminate("test");
        std::optional<llc::Message> bye = peer.nextOf(llc::Type::DeleteLink, false);
        ASSERT_TRUE(bye);
        EXPECT_EQ(bye->version, 2);
    }
}

// LLC versions are 1 or 2.
TEST(LinkGroup, LlcVersionsAreOneOrTwo)
{
    InprocRegistrar a, b;
    InprocFabric fabric(a, b);
    LinkGroupConfig c;
    c.llcVersion = 2;
    EXPECT_TRUE(LinkGroup::create(c, fabric));
    c.llcVersion = 3;
    EXPECT_EQ(LinkGroup::create(c, fabric).error(), std::errc::invalid_argument);
    c.llcVersion = 0;
    EXPECT_EQ(LinkGroup::create(c, fabric).error(), std::errc::invalid_argument);
}

// Two v2 groups understand each other: CONFIRM_LINK both ways, then the v2 ADD_LINK (its
// rkeys in the extension) gives both the second link; nothing malformed.
TEST(LinkGroup, TwoV2GroupsComeUpWithTwoLinks)
{
    LinkGroupConfig c;
    c.llcVersion = 2;
    c.timeouts = Pair::fastTimeouts();
    test::GroupPair p;
    ASSERT_TRUE(p.create(c));
    ASSERT_TRUE(p.start());
    EXPECT_EQ(p.server.group->activeLinks(), 2u);
    EXPECT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    EXPECT_EQ(p.server.group->stats().malformed, 0u);
    EXPECT_EQ(p.client.group->stats().malformed, 0u);
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
        std::shared_ptr<LinkGroup> s = servers.find(Role::Server, clientId);
        std::shared_ptr<LinkGroup> c = clients.find(Role::Client, serverId);
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
    std::vector<std::shared_ptr<LinkGroup>> groups = servers.groups();
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0]->connectionCount(), 255u);
    EXPECT_EQ(groups[1]->connectionCount(), 45u);
    EXPECT_EQ(clients.groups().size(), 2u);
    EXPECT_EQ(servers.find(Role::Client, clientId), nullptr) << "roles do not mix";
    // A terminated group is let go of (a reap posted by its end), the live one stays.
    std::weak_ptr<LinkGroup> ended = groups[1];
    groups[1]->terminate("test");
    groups.clear();
    EXPECT_TRUE(test::eventually([&] { return servers.groups().size() == 1; }));
    EXPECT_EQ(servers.reap(), 0u);
    EXPECT_TRUE(test::eventually([&] { return ended.expired(); })) << "nobody else holds it";
    EXPECT_EQ(servers.groups().front()->connectionCount(), 255u);
}

// Reaping lets go of a terminated group; a holder keeps it usable (calls fail cleanly)
// until it drops it, and create() reaps before it makes a new one.
TEST(LinkGroupManager, AHeldTerminatedGroupLivesUntilItsLastHolderGoes)
{
    InprocRegistrar serverKeys, clientKeys;
    InprocFabric fabric(serverKeys, clientKeys);
    LinkGroupConfig defaults;
    defaults.maxLinks = 1;
    defaults.timeouts = Pair::fastTimeouts();
    LinkGroupManager servers(defaults, fabric), clients(defaults, fabric);
    const SystemId serverId{1}, clientId{2};
    std::shared_ptr<LinkGroup> s = servers.create(Role::Server, clientId).value();
    std::shared_ptr<LinkGroup> c = clients.create(Role::Client, serverId).value();
    ASSERT_TRUE(startLocalPair(*s, *c, fabric));
    Result<ConnectionPair> pair = connectLocalPair(*s, *c, 16384, 16384);
    ASSERT_TRUE(pair);
    ASSERT_GT(serverKeys.live(), 0u);

    s->terminate("test");
    // Both managers let go (the client's group ends on DELETE_LINK ALL).
    EXPECT_TRUE(
        test::eventually([&] { return servers.groups().empty() && clients.groups().empty(); }));
    // Held: still callable, and its links (and their registrations) are gone already.
    EXPECT_TRUE(test::eventually([&] { return serverKeys.live() == 0 && clientKeys.live() == 0; }))
        << serverKeys.live() << " " << clientKeys.live();
    EXPECT_TRUE(s->terminated());
    EXPECT_EQ(s->activeLinks(), 0u);
    EXPECT_EQ(s->closeConnection(*pair->first).error(), std::errc::not_connected);
    EXPECT_EQ(s->openConnection(16384, 16384).error(), std::errc::not_connected);

    std::weak_ptr<LinkGroup> gone = s;
    s.reset();
    EXPECT_TRUE(test::eventually([&] { return gone.expired(); }));

    // A create() reaps first: a group terminated just now is not listed beside the new one.
    std::shared_ptr<LinkGroup> next = servers.create(Role::Server, clientId).value();
    std::weak_ptr<LinkGroup> nextGone = next;
    next->terminate("no first link");
    next.reset();
    std::shared_ptr<LinkGroup> third = servers.create(Role::Server, clientId).value();
    EXPECT_EQ(servers.groups().size(), 1u);
    EXPECT_EQ(servers.groups().front(), third);
    EXPECT_TRUE(test::eventually([&] { return nextGone.expired(); }));
}

} // namespace
} // namespace smc
