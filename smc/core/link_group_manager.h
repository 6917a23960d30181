// SPDX-License-Identifier: MIT
// LinkGroupManager: the link groups of one side, found per peer and role, new ones when full.
#pragma once

#include <memory>
#include <vector>

#include "base/mutex.h"
#include "smc/core/link_group.h"

namespace smc
{

// What CLC agreed for a new group beyond role and peer (SMC-Rv2's first-contact extension).
struct GroupTerms {
    std::uint8_t llcVersion = 1;
    unsigned maxConns = 0; // 0: the manager's defaults
    unsigned maxLinks = 0; // likewise
};

// The groups are shared: the manager lets go of a terminated one (reap), and it is destroyed
// with its links, buffers and pool when the last holder (a connection, a handshake) drops it.
// Drop a group on none of its own threads (not in its handlers): its destructor waits for them.
class LinkGroupManager
{
public:
    // `defaults` gives every new group its limits and timeouts; the link
    // provider is borrowed and must outlive the manager and every group it made.
    // When the provider says a path came up, each group short of its links tries to add
    // one, on its executor's blocking threads: a server by ADD_LINK, a client by asking the
    // server (REQ_ADD_LINK), as Linux does when a port comes back.
    LinkGroupManager(LinkGroupConfig defaults, LinkProvider& provider);
    // Ends every group (DELETE_LINK ALL to its peer) and lets go of it; waits for a reap or
    // a link addition that runs on another thread (an addition waits for the peer: up to the
    // group's LLC timeouts).
    ~LinkGroupManager();
    LinkGroupManager(const LinkGroupManager&) = delete;
    LinkGroupManager& operator=(const LinkGroupManager&) = delete;

    // A live group with `peer` in `role` that takes one more connection
    // (Linux smc_conn_create: same peer system id and role, room under
    // max_conns and in the rtoken table), or null: then create() one.
    // The system id alone: for a server's reuse take the overload below.
    // Neither blocks beyond the manager's lock.
    std::shared_ptr<LinkGroup> find(Role role, const SystemId& peer) const;
    // As above, and the group speaks `llcVersion` and has an active link whose peer is at
    // `gid` and, in a v1 group whose link knows the peer's MAC, at `mac` (Linux
    // smcr_lgr_match): system ids can collide, the PROPOSAL's GID (and v1 MAC) name the
    // device. A v2 PROPOSAL carries no MAC to compare (Linux's is zero).
    std::shared_ptr<LinkGroup> find(Role role, const SystemId& peer, const Gid& gid, const Mac& mac,
                                    std::uint8_t llcVersion = 1) const;
    // A new, not yet started group with `peer`; the terminated ones go first (reap), so
    // failed first contacts do not pile up. The manager holds the group's termination
    // handler (a reap, posted to the group's executor): do not replace it. Errors:
    // LinkGroup::create's. Blocks while a terminated group is destroyed (LinkGroup's
    // destructor).
    Result<std::shared_ptr<LinkGroup>> create(Role role, const SystemId& peer,
                                              GroupTerms terms = {});
    // The limits and timeouts new groups start from.
    const LinkGroupConfig& defaults() const noexcept { return defaults_; }
    // Let go of the terminated groups; returns how many went. A group nobody else holds is
    // destroyed here (outside the manager's lock).
    std::size_t reap();
    std::vector<std::shared_ptr<LinkGroup>> groups() const;

private:
    // Shared with the reaps the groups' termination handlers post: one may run after the
    // manager is gone (then it does nothing).
    struct State {
        mutable Mutex mutex;
        ConditionVariable reaped;
        std::vector<std::shared_ptr<LinkGroup>> groups SMC_GUARDED_BY(mutex);
        // Reaps destroying groups and link additions now: they use the provider.
        unsigned busy SMC_GUARDED_BY(mutex) = 0;
        bool closed SMC_GUARDED_BY(mutex) = false; // the manager is going
    };
    static std::size_t reap(State& state);
    static void pathUp(const std::shared_ptr<State>& state);

    LinkGroupConfig defaults_;
    LinkProvider& provider_;
    const std::shared_ptr<State> state_ = std::make_shared<State>();
    int pathWatch_ = -1;
};

} // namespace smc
