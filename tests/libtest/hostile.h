// SPDX-License-Identifier: MIT
// gtest helpers for hostile-peer tests: a RawPeer's configuration, the test's side of an ADD_LINK
// flow played by hand (as either role), and a way to hold a group's flows back.
#pragma once

#include <chrono>
#include <memory>
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

// The rest of an ADD_LINK flow for `linkId` once the client accepted it: the
// ADD_LINK_CONT exchange and CONFIRM_LINK on the new link (the group's last);
// fails the test unless the new link is ACTIVE at the end.
inline void finishAddLink(RawPeer& p, std::uint8_t linkId)
{
    PeerEnd* via = p.end(0);
    ASSERT_TRUE(via);
    ASSERT_TRUE(exchangeConts(*via, linkId));
    PeerEnd* added = p.end(p.provider().made() - 1);
    ASSERT_TRUE(added) << "no new link";
    const LinkAddress& a = added->address;
    ASSERT_TRUE(added->send({1, false, llc::ConfirmLink{a.mac, a.gid, a.qpn, linkId, {}, 2, 255}}));
    ASSERT_TRUE(added->nextOf(llc::Type::ConfirmLink, true)) << "no CONFIRM_LINK response";
    ASSERT_TRUE(eventually([&] { return slotOfId(p.group(), linkId).has_value(); }));
    ASSERT_TRUE(eventually([&] { return p.group().activeLinks() == p.group().links().size(); }));
}

// The whole ADD_LINK flow for `linkId`, the test as the server of a client
// group.
inline void serveAddLink(RawPeer& p, std::uint8_t linkId)
{
    PeerEnd* via = p.end(0);
    ASSERT_TRUE(via);
    std::optional<llc::AddLink> answer = offerLink(*via, linkId);
    ASSERT_TRUE(answer) << "no ADD_LINK response";
    ASSERT_FALSE(answer->reject) << "link id " << int(linkId) << " rejected";
    ASSERT_NO_FATAL_FAILURE(finishAddLink(p, linkId));
}

// The test as the client of a server group that sent ADD_LINK `req` on its
// first link: the answer (from a second device), the ADD_LINK_CONT exchange
// (the test has no RMBs), CONFIRM_LINK on the new link.
inline void answerAddLink(RawPeer& p, const llc::AddLink& req)
{
    PeerEnd* via = p.end(0);
    ASSERT_TRUE(via);
    PeerEnd* added = p.end(p.provider().made() - 1); // made before ADD_LINK went out
    ASSERT_TRUE(added);
    ASSERT_TRUE(via->send({1, true, addLinkRequest(req.linkId)}));
    for (;;) {
        std::optional<llc::Message> m = via->nextOf(llc::Type::AddLinkCont, false);
        ASSERT_TRUE(m) << "no ADD_LINK_CONT from the server";
        const auto& c = std::get<llc::AddLinkCont>(m->body);
        ASSERT_TRUE(via->send({1, true, llc::AddLinkCont{req.linkId, 0, {}}}));
        if (c.remaining <= c.rkeys.size())
            break;
    }
    ASSERT_TRUE(added->nextOf(llc::Type::ConfirmLink, false)) << "no CONFIRM_LINK request";
    const LinkAddress& a = added->address;
    ASSERT_TRUE(
        added->send({1, true, llc::ConfirmLink{a.mac, a.gid, a.qpn, req.linkId, {}, 2, 255}}));
}

// An executor with one blocking thread: HeldFlows can hold every flow of its groups back.
inline Executor::Config oneBlockingThread()
{
    Executor::Config c;
    c.maxBlocking = 1;
    return c;
}

// Occupies a blocking thread of `executor` until release() (or the end of
// this object): on an executor with one blocking thread, no LLC flow or event
// of its groups runs meanwhile, so what a peer sends piles up as it would
// behind a slow flow, deterministically.
class HeldFlows
{
public:
    explicit HeldFlows(Executor& executor) : state_(std::make_shared<State>())
    {
        executor.postBlocking([state = state_] {
            MutexLocker lock(state->mutex);
            state->running = true;
            state->changed.notify_all();
            state->changed.wait(lock, [&]() SMC_REQUIRES(state->mutex) { return state->released; });
        });
        MutexLocker lock(state_->mutex);
        state_->changed.wait(lock, [&]() SMC_REQUIRES(state_->mutex) { return state_->running; });
    }
    ~HeldFlows() { release(); }
    HeldFlows(const HeldFlows&) = delete;
    HeldFlows& operator=(const HeldFlows&) = delete;
    void release()
    {
        {
            MutexLocker lock(state_->mutex);
            state_->released = true;
        }
        state_->changed.notify_all();
    }

private:
    struct State {
        Mutex mutex;
        ConditionVariable changed;
        bool running SMC_GUARDED_BY(mutex) = false;
        bool released SMC_GUARDED_BY(mutex) = false;
    };
    std::shared_ptr<State> state_; // the task keeps it too: it may outlive this object
};

} // namespace smc::test
