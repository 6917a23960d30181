// SPDX-License-Identifier: MIT
// LinkGroupManager: lookup by (role, peer) with room, creation, reaping.
#include "smc/core/link_group_manager.h"

#include <algorithm>

namespace smc
{

LinkGroupManager::LinkGroupManager(LinkGroupConfig defaults, LinkProvider& provider)
    : defaults_(std::move(defaults)), provider_(provider)
{
}

LinkGroup* LinkGroupManager::find(Role role, const SystemId& peer) const
{
    MutexLocker lock(mutex_);
    for (const auto& g : groups_)
        if (g->role() == role && g->peer() == peer && g->hasRoom())
            return g.get();
    return nullptr;
}

LinkGroup* LinkGroupManager::find(Role role, const SystemId& peer, const Gid& gid,
                                  const Mac& mac) const
{
    MutexLocker lock(mutex_);
    for (const auto& g : groups_) {
        if (g->role() != role || g->peer() != peer || !g->hasRoom())
            continue;
        for (const LinkInfo& l : g->links())
            if (l.state == LinkState::Active && l.peer.gid == gid &&
                (l.peer.mac == Mac{} || l.peer.mac == mac))
                return g.get();
    }
    return nullptr;
}

Result<LinkGroup*> LinkGroupManager::create(Role role, const SystemId& peer)
{
    LinkGroupConfig config = defaults_;
    config.role = role;
    config.peer = peer;
    Result<std::unique_ptr<LinkGroup>> g = LinkGroup::create(config, provider_);
    if (!g)
        return g.error();
    MutexLocker lock(mutex_);
    groups_.push_back(std::move(*g));
    return groups_.back().get();
}

std::size_t LinkGroupManager::reap()
{
    std::vector<std::unique_ptr<LinkGroup>> dead;
    {
        MutexLocker lock(mutex_);
        auto it = std::stable_partition(groups_.begin(), groups_.end(),
                                        [](const auto& g) { return !g->terminated(); });
        std::move(it, groups_.end(), std::back_inserter(dead));
        groups_.erase(it, groups_.end());
    }
    return dead.size(); // destroyed here, outside the lock
}

std::vector<LinkGroup*> LinkGroupManager::groups() const
{
    MutexLocker lock(mutex_);
    std::vector<LinkGroup*> out;
    for (const auto& g : groups_)
        out.push_back(g.get());
    return out;
}

} // namespace smc
