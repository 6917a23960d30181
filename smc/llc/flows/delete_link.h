// SPDX-License-Identifier: MIT
// DeleteLinkFlow: a link goes (deleted by us or by the peer, or lost) and its connections move.
#pragma once

#include "smc/llc/llc_core.h"

namespace smc
{

class DeleteLinkFlow
{
public:
    explicit DeleteLinkFlow(LlcCore& core) : core_(core) {}

    // Our DELETE_LINK of an ACTIVE link; the last one ends the group. Waits for the flow token.
    Result<void> deleteLink(unsigned slot);
    // The peer's DELETE_LINK, holding the flow token.
    void remoteDeleteLink(unsigned via, const llc::DeleteLink& req);
    // Holding the flow token: the connections on `slot` move to a survivor, the peer is told
    // if `tellPeer`, and the link is cleared. The last link gone ends the group.
    void failover(unsigned slot, bool tellPeer,
                  llc::DeleteReason reason = llc::DeleteReason::LostPath);

private:
    LlcCore& core_;
};

} // namespace smc
