// SPDX-License-Identifier: MIT
// SmcStack::Smcr: the stack's SMC-R device as the handshakes use it (not installed).
#pragma once

#include <memory>

#include "base/mutex.h"
#include "smc/core/link_group_manager.h"
#include "smc/socket/stack.h"

namespace smc
{

struct SmcStack::Smcr {
    LinkProvider* provider = nullptr;
    Gid gid{};
    Mac mac{};
    SystemId systemId{};
    bool offerV2 = false; // SmcrConfig's
    std::unique_ptr<LinkGroupManager> groups;
    // Linux's smc_client_lgr_pending / smc_server_lgr_pending: one SMC-R handshake at a
    // time per role, so two first contacts never make two groups with one peer.
    Mutex clientPending;
    Mutex serverPending;
};

} // namespace smc
