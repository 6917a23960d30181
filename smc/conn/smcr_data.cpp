// SPDX-License-Identifier: MIT
// The SMC-R bytes: gathered in our sndbuf, RDMA-written before the CDC that announces them.
#include "smc/conn/smcr_connection.h"

#include <algorithm>
#include <chrono>

namespace smc::net
{

// A send only copies into our sndbuf, at the bytes' place in the stream (a ring of its own
// size); deliver() writes everything a CDC announces before it goes, so bytes held back by
// corking leave in one RDMA WRITE (two or three at a wrap) with the CDC that pushes them.
// Only a sndbuf full of bytes not written yet makes a send write them first.
Result<void> SmcrConnection::put(std::size_t /*at*/, std::span<const std::byte> bytes,
                                 Deadline deadline, bool nonBlocking)
{
    // n <= putLimit(): once what waits is written, the bytes fit.
    if (copied_ + bytes.size() - written_.load(std::memory_order_acquire) > stageBytes_) {
        for (;;) {
            {
                MutexLocker tx(txMutex_);
                if (writeOut(copied_))
                    break;
            }
            MutexLocker lock(mutex_);
            if (std::error_code refused = cdc_.sendRefusal())
                return refused;
            if (!sendStalled())
                continue; // moved meanwhile: again, on the new link
            if (nonBlocking)
                return std::make_error_code(std::errc::resource_unavailable_try_again);
            wait(lock, wakes_, deadline, false); // onMoved wakes us
            if (Clock::now() >= deadline)
                return std::make_error_code(std::errc::timed_out);
        }
    }
    const std::size_t at = copied_ % stageBytes_;
    const std::size_t first = std::min(bytes.size(), stageBytes_ - at);
    Result<void> r = group_->fillSndbuf(*conn_, at, bytes.first(first));
    if (r && bytes.size() > first)
        r = group_->fillSndbuf(*conn_, 0, bytes.subspan(first));
    if (!r) { // the group ended the connection
        MutexLocker lock(mutex_);
        if (!cdc_.closed)
            (void)abort(false);
        return std::make_error_code(std::errc::connection_reset);
    }
    copied_ += bytes.size();
    return {};
}

std::size_t SmcrConnection::piecesTo(std::uint64_t upTo, Pieces& pieces) const
{
    std::size_t count = 0;
    for (std::uint64_t at = written_.load(std::memory_order_relaxed); at < upTo;) {
        // At most a sndbuf and at most a ring wait to be written, so two wraps at most;
        // past that, 0: the caller would announce bytes it never wrote.
        if (count == pieces.size())
            return 0;
        const std::size_t from = at % stageBytes_;
        const std::size_t to = at % peerRingSize_;
        const std::size_t n = static_cast<std::size_t>(
            std::min<std::uint64_t>({upTo - at, stageBytes_ - from, peerRingSize_ - to}));
        pieces[count++] = {from, to, n};
        at += n;
    }
    return count;
}

bool SmcrConnection::writeThenTransmit(std::uint64_t upTo, const Wire& wire)
{
    Pieces pieces;
    const std::size_t count = piecesTo(upTo, pieces);
    // No bytes to write (a window update, say): sendCdc, which does not wait for completion.
    if (count == 0 || !group_->writeSndbufThenCdc(*conn_, std::span(pieces).first(count), wire))
        return false;
    written_.store(upTo, std::memory_order_release);
    MutexLocker lock(mutex_);
    ++stats_.cdcOut;
    return true;
}

bool SmcrConnection::writeOut(std::uint64_t upTo)
{
    Pieces pieces;
    const std::size_t count = piecesTo(upTo, pieces);
    std::uint64_t done = written_.load(std::memory_order_relaxed); // only we advance it
    if (count == 0 && done < upTo) {
        MutexLocker lock(mutex_);
        (void)abort(false); // cannot happen: more waits than a sndbuf or a ring holds
        return false;
    }
    for (std::size_t i = 0; i < count; ++i) {
        const auto [from, to, n] = pieces[i];
        std::uint64_t moves = 0;
        {
            MutexLocker lock(mutex_);
            moves = moves_; // before the write: a move after it is not a stall
        }
        Result<void> w = group_->writeSndbuf(*conn_, from, to, n);
        if (!w) {
            MutexLocker lock(mutex_);
            if (w.error() == std::errc::not_connected &&
                conn_->state() == Connection::State::Open) {
                lostLinkAt_ = moves;
                return false;
            }
            if (!cdc_.closed)
                (void)abort(false); // ended, or a write the group refuses: no way on
            return false;
        }
        done += n;
        written_.store(done, std::memory_order_release);
    }
    return true;
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
