// SPDX-License-Identifier: MIT
// DELETE_LINK and failover: a link goes (orderly, by the peer, or lost), its connections move.
#include "smc/llc/flows/delete_link.h"

#include "smc/llc/link_errors.h"

namespace smc
{

using llc::Type;

void DeleteLinkFlow::failover(unsigned slot, bool tellPeer, llc::DeleteReason reason)
{
    std::optional<unsigned> to;
    std::uint8_t linkId = 0;
    {
        MutexLocker lock(core_.mutex());
        Link& l = core_.links()[slot];
        if (l.state == LinkState::Unused)
            return;
        l.state = LinkState::Inactive;
        linkId = l.linkId;
        to = core_.links().survivor(slot);
        if (to)
            ++core_.stats().failovers;
    }
    if (!to) {
        core_.clearLink(slot);
        core_.terminate("last link lost", llc::DeleteReason::LostPath, false);
        return;
    }
    // After the link went INACTIVE: a connection opened on it until then is
    // in the host's table already and moves too.
    core_.host().moveConnections(slot, *to);
    if (tellPeer) {
        llc::DeleteLink del{false, true, linkId, reason};
        // A client only tells (as Linux's does): the server answers with a DELETE_LINK
        // request of its own, which the request queue answers. Were the client to wait
        // here, that request could be queued behind this flow, and Linux's server drops
        // the client's request while its own delete of the link runs: both would wait out
        // their timeouts.
        if (core_.config().role == Role::Client)
            (void)core_.send(*to, {1, false, del});
        else
            (void)core_.exchange(*to, {1, false, del}, *to, Type::DeleteLink, true,
                                 core_.config().timeouts.wait);
    }
    core_.clearLink(slot);
}

void DeleteLinkFlow::remoteDeleteLink(unsigned via, const llc::DeleteLink& req)
{
    if (req.all) {
        core_.terminate("peer deleted the link group", req.reason, req.orderly);
        return;
    }
    std::optional<unsigned> slot;
    {
        MutexLocker lock(core_.mutex());
        slot = core_.links().slotOf(req.linkId);
    }
    llc::DeleteLink resp = req;
    resp.reason = slot ? llc::DeleteReason::None : llc::DeleteReason::UnknownLink;
    (void)core_.send(via, {1, true, resp});
    if (slot)
        failover(*slot, false);
}

Result<void> DeleteLinkFlow::deleteLink(unsigned slot)
{
    if (slot >= kMaxLinks)
        return LinkErrc::InvalidSlot;
    Result<FlowToken> token = core_.acquireFlow(Flow::DeleteLink);
    if (!token)
        return token.error();
    std::optional<unsigned> to;
    bool active;
    {
        MutexLocker lock(core_.mutex());
        active = core_.links()[slot].state == LinkState::Active;
        if (active)
            to = core_.links().survivor(slot);
    }
    if (!active)
        return LinkErrc::NoSuchLink;
    if (!to) {
        token->release();
        core_.terminate("last link deleted", llc::DeleteReason::ProgramTerminated, true);
        return {};
    }
    failover(slot, true);
    return {};
}

} // namespace smc
