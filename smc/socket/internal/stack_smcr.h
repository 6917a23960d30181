// SPDX-License-Identifier: MIT
// SmcStack::Smcr: the stack's SMC-R device as the handshakes use it (not installed).
#pragma once

#include <array>
#include <cstdint>
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
    // Linux's smc_client_lgr_pending: one client SMC-R handshake at a time, so two first
    // contacts never make two groups with one peer.
    Mutex clientPending;
    // Linux's smc_server_lgr_pending, per peer: the server's choice of a group for a peer
    // (system id and GID, as its PROPOSAL claims them) is made by one handshake at a time,
    // and a first contact holds it through CONFIRM_LINK; other peers' handshakes go on
    // meanwhile (a stranger's silent PROPOSAL holds up nobody else). Striped: two peers
    // that share a stripe wait for each other.
    static constexpr std::size_t kPendingStripes = 64;
    std::array<Mutex, kPendingStripes> serverPending;
    Mutex& serverPendingFor(const SystemId& peerId, const Gid& peerGid) noexcept
    {
        std::uint64_t h = 14695981039346656037ull; // FNV-1a
        for (std::uint8_t b : peerId)
            h = (h ^ b) * 1099511628211ull;
        for (std::uint8_t b : peerGid)
            h = (h ^ b) * 1099511628211ull;
        return serverPending[h % kPendingStripes];
    }
};

} // namespace smc
