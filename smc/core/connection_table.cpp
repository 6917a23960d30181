// SPDX-License-Identifier: MIT
// ConnectionTable: tokens, per-link loads, failover moves, and what outlives the group's end.
#include "smc/core/connection_table.h"

#include "smc/core/conn_errors.h"

namespace smc
{

Result<Connection*> ConnectionTable::open(BufferRef rmb, BufferRef sndbuf, unsigned maxConns,
                                          const PickLink& pick)
{
    MutexLocker lock(mutex_);
    if (open_.size() >= maxConns)
        return std::make_error_code(std::errc::no_buffer_space);
    std::optional<unsigned> slot = closed_ ? std::nullopt : pick(loads_);
    if (!slot)
        return std::make_error_code(std::errc::not_connected);
    std::uint32_t token;
    do
        token = nextToken_++;
    while (token == 0 || open_.count(token));
    auto conn = std::make_unique<Connection>(token, rmb, sndbuf, *slot);
    Connection* c = conn.get();
    open_.emplace(token, std::move(conn));
    ++loads_[*slot];
    ++opened_;
    return c;
}

Result<std::unique_ptr<Connection>> ConnectionTable::close(const Connection& conn)
{
    MutexLocker lock(mutex_);
    auto it = open_.find(conn.token);
    if (it == open_.end() || it->second.get() != &conn) {
        auto dead = ended_.find(conn.token);
        if (dead == ended_.end() || dead->second.get() != &conn)
            return ConnErrc::UnknownConnection;
        ended_.erase(dead); // the group ended it, buffers are back already
        return std::make_error_code(std::errc::not_connected);
    }
    std::unique_ptr<Connection> owned = std::move(it->second);
    open_.erase(it);
    unsigned& load = loads_[owned->link()];
    if (load > 0)
        --load;
    return owned;
}

void ConnectionTable::move(unsigned from, unsigned to)
{
    MutexLocker lock(mutex_);
    for (auto& [token, conn] : open_) {
        if (conn->link() == from) {
            conn->link_.store(to, std::memory_order_release);
            ++loads_[to];
        }
    }
    loads_[from] = 0;
}

std::vector<llc::RkeyPair> ConnectionTable::rkeys(unsigned from, unsigned to) const
{
    std::vector<llc::RkeyPair> out;
    MutexLocker lock(mutex_);
    for (const auto& [token, conn] : open_) {
        const BufferDesc& d = *conn->rmb.desc();
        if (d.isRegistered(from) && d.isRegistered(to))
            out.push_back(
                {d.registration(from).rkey, d.registration(to).rkey, d.registration(to).addr});
    }
    return out;
}

std::map<std::uint32_t, std::unique_ptr<Connection>> ConnectionTable::closeAll()
{
    MutexLocker lock(mutex_);
    closed_ = true;
    loads_ = {};
    return std::exchange(open_, {});
}

void ConnectionTable::retire(std::map<std::uint32_t, std::unique_ptr<Connection>> conns)
{
    MutexLocker lock(mutex_);
    ended_.merge(conns);
}

bool ConnectionTable::closeIfIdle()
{
    MutexLocker lock(mutex_);
    if (closed_ || !open_.empty())
        return false;
    closed_ = true;
    return true;
}

std::size_t ConnectionTable::size() const
{
    MutexLocker lock(mutex_);
    return open_.size();
}

std::uint64_t ConnectionTable::opened() const
{
    MutexLocker lock(mutex_);
    return opened_;
}

ConnectionTable::Loads ConnectionTable::loads() const
{
    MutexLocker lock(mutex_);
    return loads_;
}

std::vector<const Connection*> ConnectionTable::list() const
{
    MutexLocker lock(mutex_);
    std::vector<const Connection*> out;
    for (const auto& [token, conn] : open_)
        out.push_back(conn.get());
    return out;
}

bool ConnectionTable::closed() const
{
    MutexLocker lock(mutex_);
    return closed_;
}

void releaseBuffers(BufferPool& pool, const BufferRef& rmb, const BufferRef& sndbuf) noexcept
{
    (void)pool.release(rmb);
    (void)pool.release(sndbuf);
}

} // namespace smc
