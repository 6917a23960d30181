// SPDX-License-Identifier: MIT
// ConnectionTable: tokens, per-link loads, failover moves.
#include "smc/core/connection_table.h"

namespace smc
{

Result<ConnectionPtr> ConnectionTable::open(const LinkGroup* group, BufferRef rmb, BufferRef sndbuf,
                                            unsigned maxConns, const PickLink& pick)
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
    auto conn = std::make_shared<Connection>(group, token, rmb, sndbuf, *slot);
    open_.emplace(token, conn);
    ++loads_[*slot];
    ++opened_;
    return conn;
}

void ConnectionTable::remove(const Connection& conn)
{
    MutexLocker lock(mutex_);
    auto it = open_.find(conn.token);
    if (it == open_.end() || it->second.get() != &conn)
        return;
    unsigned& load = loads_[conn.link()];
    if (load > 0)
        --load;
    open_.erase(it);
}

ConnectionPtr ConnectionTable::find(std::uint32_t token) const
{
    MutexLocker lock(mutex_);
    auto it = open_.find(token);
    return it == open_.end() ? nullptr : it->second;
}

std::vector<ConnectionPtr> ConnectionTable::move(unsigned from, unsigned to)
{
    std::vector<ConnectionPtr> moved;
    MutexLocker lock(mutex_);
    for (auto& [token, conn] : open_) {
        if (conn->link() == from) {
            conn->link_.store(to, std::memory_order_release);
            ++loads_[to];
            moved.push_back(conn);
        }
    }
    loads_[from] = 0;
    return moved;
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

std::map<std::uint32_t, ConnectionPtr> ConnectionTable::closeAll()
{
    MutexLocker lock(mutex_);
    closed_ = true;
    loads_ = {};
    return std::exchange(open_, {});
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

std::vector<ConnectionPtr> ConnectionTable::list() const
{
    MutexLocker lock(mutex_);
    std::vector<ConnectionPtr> out;
    for (const auto& [token, conn] : open_)
        out.push_back(conn);
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
