// SPDX-License-Identifier: MIT
// Two link groups whose links fail or change under open connections: failover, the last link,
// orderly delete, TEST_LINK, rkeys and handshakes across link churn, faults during ADD_LINK.
#include "smc/core/link_group.h"
#include "smc/llc/link_errors.h"
#include "smc/testing/inproc_fabric.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "tests/libtest/link_groups.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using Pair = test::LinkGroupPair;

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
    // Down to one link each side, and the client's connections moved too (its side of the
    // failover may finish after its link count dropped).
    ASSERT_TRUE(test::eventually([&] {
        if (p.server.group->activeLinks() != 1 || p.client.group->activeLinks() != 1)
            return false;
        const unsigned clientSurvivor = p.client.group->links().front().slot;
        for (auto [sc, cc] : conns)
            if (cc->link() != clientSurvivor)
                return false;
        return true;
    }));
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
        // Only the delay is undone: the other faults may have cost the link its channel (a
        // failover clears it, and so does a terminated group, timeouts.wait later).
        if (fault == 2 && !p.server.group->terminated())
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

} // namespace
} // namespace smc
