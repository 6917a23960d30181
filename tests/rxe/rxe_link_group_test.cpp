// SPDX-License-Identifier: MIT
// Link groups on real queue pairs: first link, ADD_LINK with real rkeys, a link killed,
// failover, re-add, orderly delete and termination, proven by RDMA WRITEs into peer RMBs.
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/libtest/group_pair.h"
#include "tests/libtest/link_groups.h"
#include "tests/libtest/rdma_device.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using Conns = std::vector<ConnectionPair>;

class RxeLinkGroups : public ::testing::Test
{
protected:
    void SetUp() override
    {
        LinkGroupConfig config;
        config.maxLinks = 2;
        // A TCG guest is slow; the flows are not.
        config.timeouts.firstLink = 20s;
        config.timeouts.wait = 10s;
        config.timeouts.testLink = 0ms;
        Result<void> created = pair.create(config); // opens the device
        ASSERT_TRUE(created) << created.error().message();
        ASSERT_NO_FATAL_FAILURE(test::start(pair));
        ASSERT_TRUE(bothActive(2)) << "the server adds the second link after the first";
    }

    bool bothActive(unsigned n) { return waitForLinks(*server.group, *client.group, n, 30s); }

    // Every connection writes both ways; the bytes must be in the peer RMB.
    void writeAll(const Conns& conns, std::uint8_t value)
    {
        for (auto [sc, cc] : conns) {
            EXPECT_TRUE(test::writeToPeer(*server.group, *sc, *cc, value));
            EXPECT_TRUE(test::writeToPeer(*client.group, *cc, *sc, value + 1));
        }
    }

    // Its groups go before its device: their links' QPs and MRs first.
    test::GroupPair pair{test::Transport::Rdma, test::rdmaDeviceName()};
    test::GroupSide& server = pair.server;
    test::GroupSide& client = pair.client;
};

TEST_F(RxeLinkGroups, AddKillFailoverReAddWithRdmaWrites)
{
    // The links are real QPs: the peer addresses came over the LLC.
    for (const LinkInfo& l : server.group->links()) {
        for (const LinkInfo& cl : client.group->links()) {
            if (cl.linkId != l.linkId)
                continue;
            EXPECT_EQ(l.peer.qpn, cl.local.qpn);
            EXPECT_EQ(cl.peer.qpn, l.local.qpn);
            EXPECT_EQ(l.peer.gid, cl.local.gid);
        }
    }

    Conns conns;
    for (int i = 0; i < 6; ++i)
        conns.push_back(test::handshake(*server.group, *client.group));
    ASSERT_FALSE(::testing::Test::HasFailure());
    test::expectRtokensAgree(*server.group, *client.group, conns);
    for (const LinkInfo& l : server.group->links())
        EXPECT_EQ(l.connections, 3u) << "least loaded link first";
    writeAll(conns, 1);

    // Kill the second link's QP at the server: failover moves its connections,
    // DELETE_LINK on the survivor tells the client.
    const unsigned killed = server.group->links().back().slot;
    ASSERT_TRUE(server.group->breakLink(killed));
    ASSERT_TRUE(bothActive(1));
    EXPECT_EQ(server.group->type(), GroupType::Single);
    EXPECT_EQ(client.group->type(), GroupType::Single);
    const unsigned survivor = server.group->links().front().slot;
    for (auto [sc, cc] : conns)
        ASSERT_EQ(sc->link(), survivor);
    writeAll(conns, 3);
    EXPECT_GE(server.group->stats().failovers, 1u);
    EXPECT_GE(client.group->stats().failovers, 1u);

    // A new link: ADD_LINK_CONT carries the real rkeys of all six RMBs.
    ASSERT_TRUE(server.group->addLink());
    ASSERT_TRUE(bothActive(2));
    test::expectRtokensAgree(*server.group, *client.group, conns);

    // Now kill the old link at the client: every connection moves to the new
    // link and the WRITEs go through the rtokens ADD_LINK_CONT taught.
    const std::uint8_t oldId = server.group->linkId(survivor);
    ASSERT_TRUE(client.group->breakLink(*test::slotOfId(*client.group, oldId)));
    ASSERT_TRUE(bothActive(1));
    EXPECT_NE(server.group->links().front().linkId, oldId);
    writeAll(conns, 5);

    // Orderly end: DELETE_RKEY per connection, DELETE_LINK ALL, nothing left.
    for (auto [sc, cc] : conns) {
        EXPECT_TRUE(client.group->closeConnection(*cc));
        EXPECT_TRUE(server.group->closeConnection(*sc));
    }
    EXPECT_EQ(server.group->rtokens().used(), 0u);
    EXPECT_EQ(client.group->rtokens().used(), 0u);
    server.group->terminate("test done");
    ASSERT_TRUE(test::eventually([&] { return client.terminations.load() == 1; }, 30s));
    EXPECT_EQ(server.terminations.load(), 1);
    for (test::GroupSide* s : {&server, &client}) {
        const PoolStats st = s->group->pool().stats();
        EXPECT_EQ(st.rmb.inUseBytes, 0);
        EXPECT_EQ(st.sndbuf.inUseBytes, 0);
    }
}

TEST_F(RxeLinkGroups, OrderlyDeleteAndReqAddLinkKeepTheConnectionsWriting)
{
    Conns conns;
    for (int i = 0; i < 4; ++i)
        conns.push_back(test::handshake(*server.group, *client.group));
    ASSERT_FALSE(::testing::Test::HasFailure());
    ASSERT_TRUE(client.group->deleteLink(conns.front().second->link())) << "either side may delete";
    ASSERT_TRUE(bothActive(1));
    writeAll(conns, 7);

    // The client asks for its second link back (REQ_ADD_LINK); the new QP
    // pair learns every RMB's rkeys and carries the connections once the old
    // link is gone.
    Result<void> added = client.group->requestAddLink();
    ASSERT_TRUE(added) << added.error().message();
    ASSERT_TRUE(bothActive(2));
    test::expectRtokensAgree(*server.group, *client.group, conns);
    ASSERT_TRUE(server.group->deleteLink(conns.front().first->link()));
    ASSERT_TRUE(bothActive(1));
    writeAll(conns, 9);
    EXPECT_EQ(server.terminations.load() + client.terminations.load(), 0);
}

// rxe0's port 1 is ACTIVE (its sysfs state reads "4: ACTIVE").
bool portActive()
{
    std::ifstream state("/sys/class/infiniband/rxe0/ports/1/state");
    std::string text;
    std::getline(state, text);
    return text.find("ACTIVE") != std::string::npos;
}

// A port that goes down takes its links down at once (IBV_EVENT_PORT_ERR), idle ones too:
// with TEST_LINK off nothing else would notice. Both links sit on rxe0's one port here, so
// both groups end. It sets rxe0's netdev down and up again: in the rxe guest only.
TEST_F(RxeLinkGroups, APortDownTakesItsIdleLinksDownAtOnce)
{
    if (std::getenv("SMC_RXE_GUEST") == nullptr)
        GTEST_SKIP() << "sets dummy0 down: in the rxe guest only";
    ASSERT_EQ(std::system("ip link set dummy0 down"), 0);
    const bool ended = test::eventually(
        [&] { return server.terminations.load() > 0 && client.terminations.load() > 0; }, 5s);
    EXPECT_EQ(std::system("ip link set dummy0 up"), 0);
    EXPECT_TRUE(test::eventually(portActive, 10s));
    ASSERT_TRUE(ended) << "server: " << server.reason << ", client: " << client.reason;
    EXPECT_EQ(server.group->activeLinks(), 0u);
    EXPECT_EQ(client.group->activeLinks(), 0u);
}

} // namespace
} // namespace smc
