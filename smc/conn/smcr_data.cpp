// SPDX-License-Identifier: MIT
// The SMC-R bytes: RDMA WRITEs into the peer's ring (again after a failover), reads of ours.
#include "smc/conn/smcr_connection.h"

#include <algorithm>
#include <chrono>

namespace smc::net
{

// At most two RDMA WRITEs, split at the end of the peer's ring, each staged in our sndbuf
// (putLimit(): it may be smaller than the peer's ring).
Result<void> SmcrConnection::put(std::size_t at, std::span<const std::byte> bytes,
                                 Deadline deadline, bool nonBlocking)
{
    const std::size_t first = std::min<std::size_t>(bytes.size(), peerRingSize_ - at);
    for (;;) {
        std::uint64_t moves = 0;
        {
            MutexLocker lock(mutex_);
            // Again after a failover: the peer may have closed or aborted meanwhile.
            if (std::error_code refused = cdc_.sendRefusal())
                return refused;
            moves = moves_;
        }
        Result<void> w = group_->write(*conn_, 0, at, bytes.first(first));
        if (w && bytes.size() > first)
            w = group_->write(*conn_, first, 0, bytes.subspan(first));
        if (w)
            return {};
        MutexLocker lock(mutex_);
        if (w.error() != std::errc::not_connected || conn_->state() != Connection::State::Open) {
            if (!cdc_.closed)
                (void)abort(false); // ended, or a write the group refuses: no way on
            return std::make_error_code(std::errc::connection_reset);
        }
        // The link went: wait for failover to move us (or the group to end), then write the
        // same bytes again at the same place; the peer has not been told of them.
        lostLinkAt_ = moves;
        if (nonBlocking && moves_ == moves)
            return std::make_error_code(std::errc::resource_unavailable_try_again);
        if (moves_ == moves)
            wait(lock, wakes_, std::min(deadline, Clock::now() + std::chrono::milliseconds(20)),
                 false);
        if (Clock::now() >= deadline)
            return std::make_error_code(std::errc::timed_out);
    }
}

Result<void> SmcrConnection::take(std::size_t at, std::span<std::byte> into)
{
    const std::size_t first = std::min<std::size_t>(into.size(), ringSize() - at);
    Result<void> r = group_->readRmb(*conn_, at, into.first(first));
    if (r && into.size() > first)
        r = group_->readRmb(*conn_, 0, into.subspan(first));
    return r;
}

} // namespace smc::net
