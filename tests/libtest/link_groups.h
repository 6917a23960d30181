// SPDX-License-Identifier: MIT
// gtest helpers for tests with a server and a client LinkGroup (a GroupPair): start, the
// handshake, link lookups, polling, writes and rtoken checks; LinkGroupPair, the in-process
// pair with the limits and fast timeouts the link-group tests vary.
#pragma once

#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "smc/core/link_group.h"
#include "smc/testing/local_pair.h"
#include "tests/libtest/group_pair.h"
#include "tests/libtest/liveness.h"

namespace smc::test
{

inline std::optional<unsigned> slotOfId(const LinkGroup& g, std::uint8_t linkId)
{
    for (const LinkInfo& l : g.links())
        if (l.linkId == linkId)
            return l.slot;
    return std::nullopt;
}

// Starts the pair (its first link), failing the test on error; run it
// under ASSERT_NO_FATAL_FAILURE.
inline void start(GroupPair& pair)
{
    ASSERT_TRUE(pair.server.group && pair.client.group) << "the groups were not created";
    Result<void> started = pair.start();
    ASSERT_TRUE(started) << started.error().message();
}

// One connection on both sides (connectLocalPair), failing the test on error.
inline ConnectionPair handshake(LinkGroup& server, LinkGroup& client, std::size_t bytes = 65536)
{
    Result<ConnectionPair> c = connectLocalPair(server, client, bytes, bytes);
    EXPECT_TRUE(c) << "handshake: " << c.error().message();
    return c ? *c : ConnectionPair{};
}

// `from` writes 64 bytes of `value` into the peer RMB of `conn` over the link
// the connection rides now (LinkGroup::write); they must arrive in `peer`'s
// RMB, the far end of the same connection.
inline bool writeToPeer(LinkGroup& from, const Connection& conn, const Connection& peer,
                        std::uint8_t value)
{
    std::array<std::byte, 64> data;
    data.fill(std::byte{value});
    const std::size_t offset = 128u * value;
    if (Result<void> r = from.write(conn, offset, data); !r) {
        ADD_FAILURE() << "write on link slot " << conn.link() << ": " << r.error().message();
        return false;
    }
    return std::memcmp(peer.rmb->data() + offset, data.data(), data.size()) == 0;
}

// Both sides hold, for every connection and every link they share, the rkey
// the peer registered its RMB with on that link.
inline void expectRtokensAgree(const LinkGroup& server, const LinkGroup& client,
                               const std::vector<ConnectionPair>& conns)
{
    for (auto [sc, cc] : conns) {
        for (const LinkInfo& sl : server.links()) {
            std::optional<unsigned> cslot = slotOfId(client, sl.linkId);
            ASSERT_TRUE(cslot) << "link " << int(sl.linkId) << " only at the server";
            auto atServer = server.rtokens().get(*sc->peerRmb(), sl.slot);
            auto atClient = client.rtokens().get(*cc->peerRmb(), *cslot);
            ASSERT_TRUE(atServer && atClient) << "link " << int(sl.linkId);
            EXPECT_EQ(atServer->rkey, cc->rmb->registration(*cslot).rkey);
            EXPECT_EQ(atClient->rkey, sc->rmb->registration(sl.slot).rkey);
        }
    }
}

// An in-process pair with the limits, timeouts and idle delays these tests vary.
struct LinkGroupPair : GroupPair {
    explicit LinkGroupPair(unsigned maxLinks = 2, LlcTimeouts timeouts = fastTimeouts())
        : LinkGroupPair(limits(maxLinks, 255), limits(maxLinks, 255), timeouts)
    {
    }
    LinkGroupPair(std::pair<unsigned, unsigned> serverLimits,
                  std::pair<unsigned, unsigned> clientLimits, LlcTimeouts timeouts = fastTimeouts(),
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
        t.firstLink = std::chrono::seconds(2);
        t.wait = std::chrono::seconds(1);
        t.flowStart = std::chrono::seconds(5);
        t.testLink = std::chrono::milliseconds(0);
        return t;
    }

    // Hides GroupPair::start(): the first link, or the test fails.
    void start() { test::start(*this); }

    ConnectionPair connect() { return handshake(*server.group, *client.group); }
};

} // namespace smc::test
