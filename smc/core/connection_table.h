// SPDX-License-Identifier: MIT
// ConnectionTable: a link group's open connections and their links' loads.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "base/mutex.h"
#include "base/result.h"
#include "pool/buffer_pool.h"
#include "smc/core/connection.h"
#include "smc/llc/llc_messages.h"

namespace smc
{

class ConnectionTable
{
public:
    using Loads = std::array<unsigned, kMaxLinks>; // connections per link slot
    // Picks the link for a new connection (given the loads), or none.
    using PickLink = std::function<std::optional<unsigned>(const Loads&)>;

    // A new connection of `group` on the link `pick` chooses, under the
    // table's lock (so failover, which moves connections after a link went
    // inactive, sees it). Errors: no_buffer_space (maxConns reached),
    // not_connected (no link, or the table is closed: the group ends or was
    // idle too long). The buffers stay the caller's on error.
    Result<ConnectionPtr> open(const LinkGroup* group, BufferRef rmb, BufferRef sndbuf,
                               unsigned maxConns, const PickLink& pick);
    // Takes `conn` out (nothing happens if it is not in).
    void remove(const Connection& conn);
    // The open connection with alert token `token`, or null.
    ConnectionPtr find(std::uint32_t token) const;
    // Failover: every connection on `from` rides `to` from now on; returns them.
    std::vector<ConnectionPtr> move(unsigned from, unsigned to);
    std::vector<llc::RkeyPair> rkeys(unsigned from, unsigned to) const;
    // The group ends: no connection opens any more; every open one is
    // returned, for the group to end it.
    std::map<std::uint32_t, ConnectionPtr> closeAll();
    // The idle timer fired: true if still no connection (none opens from now).
    bool closeIfIdle();

    std::size_t size() const;
    // How many connections were ever opened (the idle timer's "none since").
    std::uint64_t opened() const;
    Loads loads() const;
    std::vector<ConnectionPtr> list() const;
    bool closed() const;

private:
    mutable Mutex mutex_;
    std::map<std::uint32_t, ConnectionPtr> open_ SMC_GUARDED_BY(mutex_);
    Loads loads_ SMC_GUARDED_BY(mutex_){};
    std::uint32_t nextToken_ SMC_GUARDED_BY(mutex_) = 1;
    std::uint64_t opened_ SMC_GUARDED_BY(mutex_) = 0;
    bool closed_ SMC_GUARDED_BY(mutex_) = false;
};

// Both buffers of a connection back to its pool (errors are the pool's
// business: a buffer still registered somewhere is unregistered there).
void releaseBuffers(BufferPool& pool, const BufferRef& rmb, const BufferRef& sndbuf) noexcept;

} // namespace smc
