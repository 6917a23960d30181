// SPDX-License-Identifier: MIT
// LinkGroupManager: lookup by (role, peer) with room, creation, reaping of terminated groups.
#include "smc/core/link_group_manager.h"

#include <algorithm>

namespace smc
{

LinkGroupManager::LinkGroupManager(LinkGroupConfig defaults, LinkProvider& provider)
    : defaults_(std::move(defaults)), provider_(provider)
{
    pathWatch_ =
        provider_.watchPaths([state = std::weak_ptr<State>(state_)] { pathUp(state.lock()); });
}

LinkGroupManager::~LinkGroupManager()
{
    provider_.unwatchPaths(pathWatch_);
    std::vector<std::shared_ptr<LinkGroup>> all;
    {
        MutexLocker lock(state_->mutex);
        state_->closed = true;
        // A posted reap may be destroying groups, an addition adding a link: they use the
        // provider, which may go next.
        state_->reaped.wait(lock, [&]() SMC_REQUIRES(state_->mutex) { return state_->busy == 0; });
        all.swap(state_->groups);
    }
    // The peers hear of it (DELETE_LINK ALL), as Linux's groups end when the module goes.
    for (const std::shared_ptr<LinkGroup>& g : all)
        g->terminate("link group manager closed");
    // Destroyed here, outside the lock (unless held elsewhere).
}

std::shared_ptr<LinkGroup> LinkGroupManager::find(Role role, const SystemId& peer) const
{
    MutexLocker lock(state_->mutex);
    for (const auto& g : state_->groups)
        if (g->role() == role && g->peer() == peer && g->hasRoom())
            return g;
    return nullptr;
}

std::shared_ptr<LinkGroup> LinkGroupManager::find(Role role, const SystemId& peer, const Gid& gid,
                                                  const Mac& mac, std::uint8_t llcVersion) const
{
    MutexLocker lock(state_->mutex);
    for (const auto& g : state_->groups) {
        if (g->role() != role || g->peer() != peer || g->llcVersion() != llcVersion ||
            !g->hasRoom())
            continue;
        for (const LinkInfo& l : g->links())
            if (l.state == LinkState::Active && l.peer.gid == gid &&
                (llcVersion >= 2 || l.peer.mac == Mac{} || l.peer.mac == mac))
                return g;
    }
    return nullptr;
}

Result<std::shared_ptr<LinkGroup>> LinkGroupManager::create(Role role, const SystemId& peer,
                                                            GroupTerms terms)
{
    (void)reap(*state_);
    LinkGroupConfig config = defaults_;
    config.role = role;
    config.peer = peer;
    config.llcVersion = terms.llcVersion;
    if (terms.maxConns != 0)
        config.maxConns = terms.maxConns;
    if (terms.maxLinks != 0)
        config.maxLinks = terms.maxLinks;
    Result<std::unique_ptr<LinkGroup>> made = LinkGroup::create(config, provider_);
    if (!made)
        return made.error();
    std::shared_ptr<LinkGroup> g = std::move(*made);
    // Posted: the handler runs on the group's threads, where the group must not be destroyed.
    Executor& executor = g->executor();
    std::weak_ptr<State> state = state_;
    g->onTerminated([&executor, state](const std::string&) {
        executor.postBlocking([state] {
            if (std::shared_ptr<State> s = state.lock())
                (void)reap(*s);
        });
    });
    MutexLocker lock(state_->mutex);
    state_->groups.push_back(g);
    return g;
}

std::size_t LinkGroupManager::reap()
{
    return reap(*state_);
}

std::size_t LinkGroupManager::reap(State& state)
{
    std::vector<std::shared_ptr<LinkGroup>> dead;
    {
        MutexLocker lock(state.mutex);
        if (state.closed)
            return 0;
        auto it = std::stable_partition(state.groups.begin(), state.groups.end(),
                                        [](const auto& g) { return !g->terminated(); });
        std::move(it, state.groups.end(), std::back_inserter(dead));
        state.groups.erase(it, state.groups.end());
        ++state.busy;
    }
    const std::size_t n = dead.size();
    dead.clear(); // destroyed here, outside the lock, unless held elsewhere
    {
        MutexLocker lock(state.mutex);
        --state.busy;
    }
    state.reaped.notify_all();
    return n;
}

// On the provider's thread: must not block (posting does not).
void LinkGroupManager::pathUp(const std::shared_ptr<State>& state)
{
    if (!state)
        return;
    MutexLocker lock(state->mutex);
    if (state->closed)
        return;
    for (const std::shared_ptr<LinkGroup>& g : state->groups) {
        const GroupType type = g->type();
        if (g->terminated() || g->maxLinks() < 2 || type == GroupType::None ||
            type == GroupType::Symmetric)
            continue;
        ++state->busy;
        g->executor().postBlocking([state, group = g]() mutable {
            // An asymmetric group gets a symmetric link, which replaces the asymmetric one.
            (void)(group->role() == Role::Server ? group->addLink() : group->requestAddLink());
            group.reset(); // destroyed (if the last) while the provider surely lives
            {
                MutexLocker l(state->mutex);
                --state->busy;
            }
            state->reaped.notify_all();
        });
    }
}

std::vector<std::shared_ptr<LinkGroup>> LinkGroupManager::groups() const
{
    MutexLocker lock(state_->mutex);
    return state_->groups;
}

} // namespace smc
