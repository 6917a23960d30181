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
// Room comes back when a completion says the bytes landed; a sndbuf that holds bytes not
// written yet makes a send write them first (and wait for that).
Result<void> SmcrConnection::put(std::size_t /*at*/, std::span<const std::byte> bytes,
                                 Deadline deadline, bool nonBlocking)
{
    // n <= putLimit(): once what waits is written and landed, the bytes fit.
    while (copied_ + bytes.size() - landed_.load(std::memory_order_acquire) > stageBytes_) {
        if (written_.load(std::memory_order_acquire) < copied_) {
            MutexLocker tx(txMutex_);
            if (writeOut(copied_))
                continue;
        }
        MutexLocker lock(mutex_);
        if (std::error_code refused = cdc_.sendRefusal())
            return refused;
        const std::uint64_t mark = waitMark();
        if (copied_ + bytes.size() - landed_.load(std::memory_order_acquire) <= stageBytes_)
            break; // landed meanwhile
        if (written_.load(std::memory_order_acquire) < copied_ && !sendStalled())
            continue; // moved meanwhile: again, on the new link
        if (nonBlocking)
            return std::make_error_code(std::errc::resource_unavailable_try_again);
        // onLanded and onMoved wake us; so does a signal handler, as on TCP.
        if (interrupts(wait(lock, mark, deadline, false), deadline))
            return std::make_error_code(std::errc::interrupted);
        if (Clock::now() >= deadline)
            return std::make_error_code(std::errc::timed_out);
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

std::size_t SmcrConnection::putLimit() const noexcept
{
    // What is on its way holds its room; what is only copied can be written to make room.
    const std::uint64_t out =
        written_.load(std::memory_order_acquire) - landed_.load(std::memory_order_acquire);
    return out < stageBytes_ ? stageBytes_ - static_cast<std::size_t>(out) : 1;
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
    const std::uint64_t from = written_.load(std::memory_order_relaxed); // only we advance it
    if (count == 0 && from < upTo)
        return false; // more than fits: the slow way aborts
    const bool bytes = count > 0;
    {
        MutexLocker lock(mutex_);
        ++inFlight_;
        corking_ += bytes;
    }
    // Before the post: the completion may come before the post returns.
    written_.store(upTo, std::memory_order_release);
    auto landed = [h = landedHook_, upTo, bytes](bool ok) {
        MutexLocker lock(h->mutex);
        if (h->self != nullptr)
            h->self->onLanded(ok, upTo, bytes);
    };
    const Result<void> posted =
        group_->writeSndbufThenCdc(*conn_, via_, std::span(pieces).first(count), wire, landed);
    MutexLocker lock(mutex_);
    if (!posted) {
        written_.store(from, std::memory_order_release);
        --inFlight_;
        corking_ -= bytes;
        roomChanged(); // a sender may have seen everything posted
        if (posted.error() != std::errc::timed_out)
            return false;
        // No send slot in time while the link stays up: as transmit() does, rather than
        // wait again the slow way.
        (void)abort(false);
        return true; // nothing to make up for
    }
    ++stats_.cdcOut;
    return true;
}

void SmcrConnection::onLanded(bool ok, std::uint64_t upTo, bool bytes)
{
    MutexLocker lock(mutex_);
    const bool wasStalled = sendStalled();
    if (ok && landed_.load(std::memory_order_relaxed) < upTo)
        landed_.store(upTo, std::memory_order_release);
    lostCdcs_ += !ok;
    --inFlight_;
    corking_ -= bytes;
    roomChanged();
    if (wasStalled && !sendStalled() && events_)
        events_.signal(); // writable again
    if (pushDue())
        postFlush(); // what autocorking held while this was on its way
}

void SmcrConnection::roomChanged()
{
    // Only senders, close and the resend wait for this: a receiver asleep stays so.
    room_.wakeAll();
}

bool SmcrConnection::awaitLanded(MutexLocker& lock, Deadline until)
{
    while (inFlight_ > 0 && Clock::now() < until)
        wait(lock, waitMark(), until, false);
    return inFlight_ == 0;
}

bool SmcrConnection::writeOut(std::uint64_t upTo)
{
    Pieces pieces;
    const std::size_t count = piecesTo(upTo, pieces);
    std::uint64_t done = written_.load(std::memory_order_relaxed); // only we advance it
    std::uint64_t moves = 0;
    {
        MutexLocker lock(mutex_);
        if (moveUnresolved())
            return false; // the resend writes them, after it went back to what landed
        moves = moves_;   // before the write: a move after it is not a stall
        if (count == 0 && done < upTo) {
            (void)abort(false); // cannot happen: more waits than a sndbuf or a ring holds
            return false;
        }
    }
    for (std::size_t i = 0; i < count; ++i) {
        const auto [from, to, n] = pieces[i];
        Result<void> w = group_->writeSndbuf(*conn_, via_, from, to, n);
        // Asked before mutex_: the group holds the connection's lock while it tells onLanded.
        const bool lost = !w && w.error() == std::errc::not_connected &&
                          conn_->state() == Connection::State::Open;
        MutexLocker lock(mutex_);
        if (!w) {
            if (lost) {
                lostLinkAt_ = moves;
                return false;
            }
            if (!cdc_.closed)
                (void)abort(false); // ended, or a write the group refuses: no way on
            return false;
        }
        // On RC its completion came after those of everything posted before it on the link.
        done += n;
        written_.store(done, std::memory_order_release);
        if (landed_.load(std::memory_order_relaxed) < done) {
            landed_.store(done, std::memory_order_release);
            roomChanged();
        }
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
