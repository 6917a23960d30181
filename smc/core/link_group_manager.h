// SPDX-License-Identifier: MIT
// LinkGroupManager: the link groups of one side, found per peer and role, new ones when full.
#pragma once

#include <memory>
#include <vector>

#include "base/mutex.h"
#include "smc/core/link_group.h"

namespace smc
{

class LinkGroupManager
{
public:
    // `defaults` gives every new group its limits and timeouts; the link
    // provider is borrowed and must outlive the manager.
    LinkGroupManager(LinkGroupConfig defaults, LinkProvider& provider);

    // A live group with `peer` in `role` that takes one more connection
    // (Linux smc_conn_create: same peer system id and role, room under
    // max_conns and in the rtoken table), or null: then create() one.
    // The system id alone: for a server's reuse take the overload below.
    LinkGroup* find(Role role, const SystemId& peer) const;
    // As above, and the group has an active link whose peer is at `gid` and,
    // when the link knows the peer's MAC, at `mac` (Linux smcr_lgr_match, v1):
    // system ids can collide, the PROPOSAL's GID and MAC name the device.
    LinkGroup* find(Role role, const SystemId& peer, const Gid& gid, const Mac& mac) const;
    // A new, not yet started group with `peer`.
    Result<LinkGroup*> create(Role role, const SystemId& peer);
    // Forget terminated groups; returns how many went.
    std::size_t reap();
    std::vector<LinkGroup*> groups() const;

private:
    LinkGroupConfig defaults_;
    LinkProvider& provider_;
    mutable Mutex mutex_;
    std::vector<std::unique_ptr<LinkGroup>> groups_ SMC_GUARDED_BY(mutex_);
};

} // namespace smc
