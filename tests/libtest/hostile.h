// SPDX-License-Identifier: MIT
// gtest helpers for hostile-peer tests: a RawPeer's configuration and the test's side of an
// ADD_LINK flow, played by hand (as the server of a client group).
#pragma once

#include <chrono>
#include <optional>
#include <variant>

#include <gtest/gtest.h>

#include "tests/libtest/link_groups.h"
#include "tests/libtest/raw_peer.h"

namespace smc::test
{

// Short waits: a refused flow must not cost the test seconds. No TEST_LINK
// timer unless a test wants one.
inline LinkGroupConfig hostileConfig(Role role, Executor* executor = nullptr)
{
    LinkGroupConfig c;
    c.role = role;
    c.timeouts.firstLink = std::chrono::milliseconds(2000);
    c.timeouts.wait = std::chrono::milliseconds(500);
    c.timeouts.flowStart = std::chrono::milliseconds(5000);
    c.timeouts.testLink = std::chrono::milliseconds(0);
    c.executor = executor;
    return c;
}

// An ADD_LINK request for `linkId` from the peer's second device, as a server
// sends it on an existing link.
inline llc::AddLink addLinkRequest(std::uint8_t linkId)
{
    llc::AddLink a;
    a.gid = RawProvider::peerGid(1);
    a.qpn = 0x777;
    a.linkId = linkId;
    a.mtu = 3;
    a.psn = 0x1234;
    return a;
}

// Sends ADD_LINK for `linkId` on `via` and returns the client's answer.
inline std::optional<llc::AddLink> offerLink(PeerEnd& via, std::uint8_t linkId)
{
    if (!via.send({1, false, addLinkRequest(linkId)}))
        return std::nullopt;
    std::optional<llc::Message> m = via.nextOf(llc::Type::AddLink, true);
    if (!m)
        return std::nullopt;
    return std::get<llc::AddLink>(m->body);
}

// The server's ADD_LINK_CONTs (the test has no RMBs) against the client's,
// until the client sent its last one. False: the client stopped answering.
inline bool exchangeConts(PeerEnd& via, std::uint8_t linkId)
{
    for (;;) {
        if (!via.send({1, false, llc::AddLinkCont{linkId, 0, {}}}))
            return false;
        std::optional<llc::Message> m = via.nextOf(llc::Type::AddLinkCont, true);
        if (!m)
            return false;
        const auto& c = std::get<llc::AddLinkCont>(m->body);
        if (c.remaining <= c.rkeys.size())
            return true;
    }
}

// The whole ADD_LINK flow for `linkId`, the test as the server of a client
// group; fails the test unless the new link is ACTIVE at the end.
inline void serveAddLink(RawPeer& p, std::uint8_t linkId)
{
    PeerEnd* via = p.end(0);
    ASSERT_TRUE(via);
    const std::size_t index = p.provider().made();
    std::optional<llc::AddLink> answer = offerLink(*via, linkId);
    ASSERT_TRUE(answer) << "no ADD_LINK response";
    ASSERT_FALSE(answer->reject) << "link id " << int(linkId) << " rejected";
    ASSERT_TRUE(exchangeConts(*via, linkId));
    PeerEnd* added = p.end(index);
    ASSERT_TRUE(added) << "no new link";
    const LinkAddress& a = added->address;
    ASSERT_TRUE(added->send({1, false, llc::ConfirmLink{a.mac, a.gid, a.qpn, linkId, {}, 2, 255}}));
    ASSERT_TRUE(added->nextOf(llc::Type::ConfirmLink, true)) << "no CONFIRM_LINK response";
    ASSERT_TRUE(eventually([&] { return slotOfId(p.group(), linkId).has_value(); }));
    ASSERT_TRUE(eventually([&] { return p.group().activeLinks() == p.group().links().size(); }));
}

} // namespace smc::test
