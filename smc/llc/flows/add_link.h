// SPDX-License-Identifier: MIT
// AddLinkFlows: ADD_LINK (with ADD_LINK_CONT or SMC-Rv2's rkeys) from the server, REQ_ADD_LINK
// from the client, CONFIRM_LINK on the new link.
#pragma once

#include <optional>

#include "smc/llc/flows/delete_link.h"
#include "smc/llc/llc_core.h"

namespace smc
{

class AddLinkFlows
{
public:
    // `deletes` takes an asymmetric link a new symmetric one replaces.
    AddLinkFlows(LlcCore& core, DeleteLinkFlow& deletes) : core_(core), deletes_(deletes) {}

    // A server's new link; waits for the flow token.
    Result<void> addLink();
    // A client's REQ_ADD_LINK; waits for the server's ADD_LINK flow to end.
    Result<void> requestAddLink();
    // The server's flow, holding the token. `offered`: ADD_LINK went out (a REQ_ADD_LINK
    // that never got that far is declined by the caller).
    Result<void> serverAddLink(bool& offered);
    // The client's answer to the server's ADD_LINK on `via`, holding the token.
    void answerAddLink(unsigned via, const llc::AddLink& req);
    // The server's response to our REQ_ADD_LINK: it will not add a link. True if a
    // requestAddLink() waited for it.
    bool declined();

private:
    enum class Request : std::uint8_t { Idle, Waiting, Added, Declined };

    // True: the link is up.
    bool clientAddLink(unsigned via, const llc::AddLink& req);
    Result<std::optional<llc::Message>> exchangeRkeys(unsigned via, unsigned newSlot,
                                                      std::uint8_t linkId,
                                                      std::optional<llc::Message> opening);
    llc::AddLinkV2Ext addLinkExt(unsigned via, unsigned newSlot, const Gid& newGid);
    bool saveAddLinkRkeys(unsigned via, unsigned newSlot,
                          const std::optional<llc::AddLinkV2Ext>& ext);

    LlcCore& core_;
    DeleteLinkFlow& deletes_;
    Request request_ SMC_GUARDED_BY(core_.mutex()) = Request::Idle; // a client's REQ_ADD_LINK
};

} // namespace smc
