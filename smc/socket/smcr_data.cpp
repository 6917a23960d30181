// SPDX-License-Identifier: MIT
// The SMC-R data path: RDMA WRITEs into the peer's ring and the CDC after them; reads of ours.
#include "smc/socket/smcr_connection.h"

#include <algorithm>
#include <chrono>

namespace smc::net
{
namespace
{

std::error_code reset()
{
    return std::make_error_code(std::errc::connection_reset);
}

} // namespace

Result<std::size_t> SmcrConnection::send(std::span<const std::byte> data, Deadline deadline,
                                         bool nonBlocking, bool hold)
{
    queued_.fetch_add(1, std::memory_order_acq_rel);
    MutexLocker sending(sendMutex_);
    Result<std::size_t> n = sendHeld(data, deadline, nonBlocking);
    // A sender that counted itself before this returns takes sendMutex_ after us and settles
    // in turn: the last of a queue never leaves bytes unannounced (unless held).
    const bool behind = queued_.fetch_sub(1, std::memory_order_acq_rel) > 1;
    MutexLocker tx(txMutex_);
    std::optional<Wire> out;
    {
        MutexLocker lock(mutex_);
        out = settle(hold, behind, data.size() - (n ? *n : 0));
    }
    if (out)
        transmit(*out);
    return n;
}

std::optional<SmcrConnection::Wire> SmcrConnection::settle(bool hold, bool behind,
                                                           std::size_t pending)
{
    if (!cdc_.announceNow(hold, behind))
        return std::nullopt;
    return build(pending);
}

Result<void> SmcrConnection::flush()
{
    MutexLocker tx(txMutex_);
    Wire out;
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return std::make_error_code(std::errc::not_connected);
        if (cdc_.aborted || cdc_.unannounced == 0)
            return {};
        out = build();
    }
    transmit(out);
    return {};
}

Result<std::size_t> SmcrConnection::sendHeld(std::span<const std::byte> data, Deadline deadline,
                                             bool nonBlocking)
{
    for (;;) {
        std::size_t space = 0;
        cdc::Cursor at;
        std::uint64_t moves = 0;
        bool sayBlocked = false;
        {
            MutexLocker lock(mutex_);
            for (;;) {
                if (std::error_code refused = cdc_.sendRefusal())
                    return refused;
                if (data.empty())
                    return std::size_t{0};
                space = cdc_.stream.sendSpace();
                at = cdc_.stream.producer();
                moves = moves_;
                if (space > 0)
                    break;
                if (!blockedSent_) { // write_blocked: the peer answers with its cursor
                    blockedSent_ = sayBlocked = true;
                    break;
                }
                if (nonBlocking)
                    return std::make_error_code(std::errc::resource_unavailable_try_again);
                if (Clock::now() >= deadline)
                    return std::make_error_code(std::errc::timed_out);
                wait(lock, deadline);
            }
        }
        if (sayBlocked) {
            // Built under txMutex_, so it leaves in sequence order with the others.
            MutexLocker tx(txMutex_);
            Wire blocked;
            {
                MutexLocker lock(mutex_);
                if (cdc_.closed || cdc_.aborted)
                    continue; // the loop says which
                blocked = build(data.size());
            }
            transmit(blocked);
            continue;
        }
        // At most two RDMA WRITEs, split at the end of the peer's ring, each staged in our
        // sndbuf (one chunk at a time: it may be smaller than the peer's ring).
        const std::size_t n = std::min({space, data.size(), stageBytes_});
        const std::size_t first = std::min<std::size_t>(n, peerRingSize_ - at.count);
        Result<void> w = group_->write(*conn_, 0, at.count, data.first(first));
        if (w && n > first)
            w = group_->write(*conn_, first, 0, data.subspan(first, n - first));
        if (!w) {
            MutexLocker lock(mutex_);
            if (w.error() != std::errc::not_connected ||
                conn_->state() != Connection::State::Open) {
                if (!cdc_.closed)
                    (void)abort(false); // ended, or a write the group refuses: no way on
                return cdc_.closed ? std::make_error_code(std::errc::not_connected) : reset();
            }
            // The link went: wait for failover to move us (or the group to end), then write
            // the same bytes again at the same place; the peer has not been told of them.
            lostLinkAt_ = moves;
            if (nonBlocking && moves_ == moves)
                return std::make_error_code(std::errc::resource_unavailable_try_again);
            if (moves_ == moves)
                wait(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(20)));
            if (Clock::now() >= deadline)
                return std::make_error_code(std::errc::timed_out);
            continue;
        }
        MutexLocker lock(mutex_);
        if (cdc_.closed || cdc_.aborted)
            return cdc_.closed ? std::make_error_code(std::errc::not_connected) : reset();
        (void)cdc_.stream.produce(n); // n <= the space it reported, and only we produce
        produced_ += n;
        cdc_.bytesSent += n;
        cdc_.unannounced += n; // send() announces them, or leaves that to the next sender
        return n;
    }
}

Result<std::size_t> SmcrConnection::recv(std::span<std::byte> into, Deadline deadline,
                                         bool nonBlocking)
{
    MutexLocker receiving(recvMutex_);
    std::size_t available = 0;
    cdc::Cursor at;
    {
        MutexLocker lock(mutex_);
        for (;;) {
            if (cdc_.closed)
                return std::make_error_code(std::errc::not_connected);
            available = cdc_.stream.readable();
            at = cdc_.stream.consumer();
            if (available == 0)
                if (std::optional<Result<std::size_t>> end = cdc_.endOfStream())
                    return *end;
            if (available > 0 || into.empty())
                break;
            if (nonBlocking)
                return std::make_error_code(std::errc::resource_unavailable_try_again);
            if (Clock::now() >= deadline)
                return std::make_error_code(std::errc::timed_out);
            wait(lock, deadline);
        }
    }
    if (into.empty())
        return std::size_t{0};
    const std::size_t n = std::min(available, into.size());
    const std::size_t first = std::min<std::size_t>(n, ringSize() - at.count);
    Result<void> r = group_->readRmb(*conn_, at.count, into.first(first));
    if (r && n > first)
        r = group_->readRmb(*conn_, 0, into.subspan(first, n - first));
    if (!r) {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return std::make_error_code(std::errc::not_connected);
        (void)abort(false); // the group ended the connection under us
        return reset();
    }
    MutexLocker tx(txMutex_);
    std::optional<Wire> out;
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return std::make_error_code(std::errc::not_connected);
        (void)cdc_.stream.consume(n); // n <= what it reported readable, and only we consume
        cdc_.bytesReceived += n;
        if (!cdc_.aborted && cdc_.stream.wantConsumerUpdate())
            out = build();
    }
    if (out)
        transmit(*out);
    return n;
}

Result<RecvView> SmcrConnection::recvView(std::span<std::byte> copy, std::size_t /*threshold*/,
                                          Deadline deadline, bool nonBlocking)
{
    return copiedView(copy,
                      [&](std::span<std::byte> into) { return recv(into, deadline, nonBlocking); });
}

Result<void> SmcrConnection::releaseView()
{
    MutexLocker lock(mutex_);
    return cdc_.closed ? std::make_error_code(std::errc::not_connected)
                       : std::make_error_code(std::errc::invalid_argument);
}

Result<void> SmcrConnection::shutdownWrite()
{
    MutexLocker tx(txMutex_);
    std::optional<Wire> out;
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return std::make_error_code(std::errc::not_connected);
        if (cdc_.aborted)
            return {};
        out = act(cdc_.close.shutdownWrite()); // sends finish before they return: nothing to drain
    }
    if (out)
        transmit(*out);
    return {};
}

} // namespace smc::net
