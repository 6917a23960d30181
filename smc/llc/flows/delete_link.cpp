// SPDX-License-Identifier: MIT
// DELETE_LINK and failover: a link goes (orderly, by the peer, or lost), its connections move.
#include "smc/llc/link_errors.h"
#include "smc/llc/llc_engine.h"

namespace smc
{

using llc::Type;

// Move a link's connections to a survivor, tell the peer if we found out
// first, and clear the link. The last link gone ends the group.
void LlcEngine::failover(unsigned slot, bool tellPeer, llc::DeleteReason reason)
{
    std::optional<unsigned> to;
    std::uint8_t linkId = 0;
    {
        MutexLocker lock(mutex_);
        Link& l = links_[slot];
        if (l.state == LinkState::Unused)
            return;
        l.state = LinkState::Inactive;
        linkId = l.linkId;
        to = links_.survivor(slot);
        if (to)
            ++stats_.failovers;
    }
    if (!to) {
        clearLink(slot);
        terminate("last link lost", llc::DeleteReason::LostPath, false);
        return;
    }
    // After the link went INACTIVE: a connection opened on it until then is
    // in the host's table already and moves too.
    host_.moveConnections(slot, *to);
    if (tellPeer) {
        llc::DeleteLink del{false, true, linkId, reason};
        // A client only tells (as Linux's does): the server answers with a DELETE_LINK
        // request of its own, which the request queue answers. Were the client to wait
        // here, that request could be queued behind this flow, and Linux's server drops
        // the client's request while its own delete of the link runs: both would wait out
        // their timeouts.
        if (config_.role == Role::Client)
            (void)send(*to, {1, false, del});
        else
            (void)exchange(*to, {1, false, del}, *to, Type::DeleteLink, true,
                           config_.timeouts.wait);
    }
    clearLink(slot);
}

void LlcEngine::remoteDeleteLink(unsigned via, const llc::DeleteLink& req)
{
    if (req.all) {
        terminate("peer deleted the link group", req.reason, req.orderly);
        return;
    }
    std::optional<unsigned> slot;
    {
        MutexLocker lock(mutex_);
        slot = links_.slotOf(req.linkId);
    }
    llc::DeleteLink resp = req;
    resp.reason = slot ? llc::DeleteReason::None : llc::DeleteReason::UnknownLink;
    (void)send(via, {1, true, resp});
    if (slot)
        failover(*slot, false);
}

Result<void> LlcEngine::deleteLink(unsigned slot)
{
    if (slot >= kMaxLinks)
        return LinkErrc::InvalidSlot;
    Result<FlowToken> token = acquireFlow(Flow::DeleteLink);
    if (!token)
        return token.error();
    std::optional<unsigned> to;
    bool active;
    {
        MutexLocker lock(mutex_);
        active = links_[slot].state == LinkState::Active;
        if (active)
            to = links_.survivor(slot);
    }
    if (!active)
        return LinkErrc::NoSuchLink;
    if (!to) {
        token->release();
        terminate("last link deleted", llc::DeleteReason::ProgramTerminated, true);
        return {};
    }
    failover(slot, true);
    return {};
}

} // namespace smc
