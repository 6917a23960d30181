// SPDX-License-Identifier: MIT
// LinkGroupPair: the in-process server/client pair of the link-group tests (limits, fast timeouts).
#pragma once

#include <chrono>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>

#include "smc/core/link_group.h"
#include "tests/libtest/link_groups.h"

namespace smc::test
{

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
