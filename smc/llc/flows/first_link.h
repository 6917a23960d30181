// SPDX-License-Identifier: MIT
// FirstLinkFlow: the group's first link and CONFIRM_LINK on it (the server asks, the client
// answers), which agrees the group's limits.
#pragma once

#include <optional>

#include "smc/llc/flows/add_link.h"
#include "smc/llc/llc_core.h"

namespace smc
{

class FirstLinkFlow
{
public:
    // A server then adds a second link through `adds`, if two were agreed.
    FirstLinkFlow(LlcCore& core, AddLinkFlows& adds) : core_(core), adds_(adds) {}

    Result<void> start(NewLink first);
    // start() in two steps: link 0 attached under `token` (the client's wait for
    // CONFIRM_LINK armed at once), then confirmFirst() under a token of its own.
    Result<void> prepareFirst(const FlowToken& token, NewLink first);
    Result<void> confirmFirst(const std::optional<LinkAddress>& peer);

private:
    Result<void> confirmPrepared(FlowToken token, const std::optional<LinkAddress>& peer);

    LlcCore& core_;
    AddLinkFlows& adds_;
    bool prepared_ SMC_GUARDED_BY(core_.mutex()) = false; // prepareFirst() ran, confirm not yet
    // The client's wait for the server's CONFIRM_LINK, armed by prepareFirst(): the core's
    // waiter from then until it is answered.
    LlcCore::Waiter waiter_{};
};

} // namespace smc
