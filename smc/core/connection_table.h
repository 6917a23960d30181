// SPDX-License-Identifier: MIT
// ConnectionTable: a link group's connections, their links' loads, and the ones the group ended.
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

    // A new connection on the link `pick` chooses, under the table's lock
    // (so failover, which moves connections after a link went inactive, sees
    // it). Errors: no_buffer_space (maxConns reached), not_connected (no
    // link, or the table is closed: the group ends or was idle too long).
    // The buffers stay the caller's on error.
    Result<Connection*> open(BufferRef rmb, BufferRef sndbuf, unsigned maxConns,
                             const PickLink& pick);
    // Takes `conn` out. Errors: UnknownConnection (not one of ours, or closed
    // already), not_connected (the group ended it: its buffers are back and
    // the object is freed now).
    Result<std::unique_ptr<Connection>> close(const Connection& conn);
    void move(unsigned from, unsigned to);
    std::vector<llc::RkeyPair> rkeys(unsigned from, unsigned to) const;
    // The group ends: no connection opens any more; every open one is
    // returned (to release its buffers), then retire()d so that pointers the
    // application holds stay valid until close().
    std::map<std::uint32_t, std::unique_ptr<Connection>> closeAll();
    void retire(std::map<std::uint32_t, std::unique_ptr<Connection>> conns);
    // The idle timer fired: true if still no connection (none opens from now).
    bool closeIfIdle();

    std::size_t size() const;
    // How many connections were ever opened (the idle timer's "none since").
    std::uint64_t opened() const;
    Loads loads() const;
    std::vector<const Connection*> list() const;
    bool closed() const;

private:
    mutable Mutex mutex_;
    std::map<std::uint32_t, std::unique_ptr<Connection>> open_ SMC_GUARDED_BY(mutex_);
    std::map<std::uint32_t, std::unique_ptr<Connection>> ended_ SMC_GUARDED_BY(mutex_);
    Loads loads_ SMC_GUARDED_BY(mutex_){};
    std::uint32_t nextToken_ SMC_GUARDED_BY(mutex_) = 1;
    std::uint64_t opened_ SMC_GUARDED_BY(mutex_) = 0;
    bool closed_ SMC_GUARDED_BY(mutex_) = false;
};

// Both buffers of a connection back to its pool (errors are the pool's
// business: a buffer still registered somewhere is unregistered there).
void releaseBuffers(BufferPool& pool, const BufferRef& rmb, const BufferRef& sndbuf) noexcept;

} // namespace smc
