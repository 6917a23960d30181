// SPDX-License-Identifier: MIT
// StackCore::Smcr: the stack's SMC-R device as the handshakes use it (not installed).
#pragma once

#include <memory>

#include "base/mutex.h"
#include "smc/core/link_group_manager.h"
#include "smc/stack/first_contacts.h"
#include "smc/stack/stack_core.h"

namespace smc
{

struct StackCore::Smcr {
    LinkProvider* provider = nullptr;
    Gid gid{};
    Mac mac{};
    SystemId systemId{};
    bool offerV2 = false; // SmcrConfig's
    std::unique_ptr<LinkGroupManager> groups;
    // Linux's smc_client_lgr_pending: one client SMC-R handshake at a time, so two first
    // contacts never make two groups with one peer.
    Mutex clientPending;
    // The server's first contacts under way, one per peer (FirstContacts).
    FirstContacts firstContacts;
};

} // namespace smc
