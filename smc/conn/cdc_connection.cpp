// SPDX-License-Identifier: MIT
// The SMC data path once for both transports: bytes into the peer's ring, CDCs, close.
#include "smc/conn/cdc_connection.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "smc/cdc/cdc_ring.h"

namespace smc::net
{
namespace
{

std::error_code errc(std::errc e)
{
    return std::make_error_code(e);
}

} // namespace

// --- For the transports -------------------------------------------------------------------

void CdcConnection::announce(std::size_t pending)
{
    const cdc::CdcMessage m = cdc_.stream.nextCdc(pending);
    cdc_.unannounced = 0; // the producer cursor is in it
    cdc_.held = false;
    blockedSent_ |= m.producerFlags.writeBlocked;
    stage(m);
}

bool CdcConnection::receive(const cdc::CdcMessage& m)
{
    const cdc::ConnFlags before = cdc_.stream.peerConnFlags();
    const std::size_t spaceBefore = cdc_.stream.sendSpace();
    if (!cdc_.stream.onPeerCdc(m))
        return false;
    // write_blocked again only once the peer freed space: a CDC that freed none (its own
    // write_blocked, say) answered nothing.
    if (cdc_.stream.sendSpace() != spaceBefore)
        blockedSent_ = false;
    if (!(cdc_.stream.peerConnFlags() == before))
        (void)cdc_.close.peerFlags(cdc_.stream.peerConnFlags()); // the peer's flags send nothing
    return true;
}

bool CdcConnection::abort(bool tellPeer)
{
    if (cdc_.aborted)
        return false;
    cdc_.aborted = true;
    cdc_.close.abort();
    wake();
    if (!tellPeer)
        return false;
    // As Linux's abort: nothing else will reach the peer from us.
    cdc_.stream.addConnFlags({.peerConnAbort = true});
    return true;
}

bool CdcConnection::act(const cdc::CloseAction& action)
{
    if (!action.sends())
        return false;
    cdc_.stream.addConnFlags(action.send);
    announce();
    return true;
}

Result<std::uint64_t> CdcConnection::look()
{
    if (cdc_.closed) // the transport may have let go of its buffers
        return errc(std::errc::not_connected);
    const std::uint64_t mark = waitMark(); // first: a change after it ends the wait below
    absorb();
    return mark;
}

bool CdcConnection::sleepLimit(Deadline until, timespec& ts, const timespec*& timeout) noexcept
{
    timeout = nullptr;
    if (until == Deadline::max())
        return true;
    const auto left = until - Clock::now();
    if (left <= Clock::duration::zero())
        return false;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    timeout = &ts;
    return true;
}

Result<void> CdcConnection::waitPast(MutexLocker& lock, std::uint64_t mark, Deadline deadline,
                                     bool nonBlocking, bool forBytes)
{
    if (nonBlocking)
        return errc(std::errc::resource_unavailable_try_again);
    if (Clock::now() >= deadline)
        return errc(std::errc::timed_out);
    if (interrupts(wait(lock, mark, deadline, forBytes), deadline))
        return errc(std::errc::interrupted);
    return {};
}

// --- Send -------------------------------------------------------------------------------

Result<std::size_t> CdcConnection::send(std::span<const std::byte> data, Deadline deadline,
                                        bool nonBlocking, bool hold)
{
    queued_.fetch_add(1, std::memory_order_acq_rel);
    MutexLocker sending(sendMutex_);
    Result<std::size_t> n = copyOut(data, deadline, nonBlocking);
    // A sender that counted itself before this returns takes sendMutex_ after us and settles
    // in turn: the last of a queue never leaves bytes unannounced (unless held).
    const bool behind = queued_.fetch_sub(1, std::memory_order_acq_rel) > 1;
    MutexLocker tx(txMutex_);
    bool announced = false;
    {
        MutexLocker lock(mutex_); // one hold: the bytes produced, and announced if they must be
        if (n && *n > 0) {
            if (cdc_.closed)
                n = errc(std::errc::not_connected);
            else if (cdc_.aborted)
                n = errc(std::errc::connection_reset);
            else {
                (void)cdc_.stream.produce(*n); // <= the space it reported; only we produce
                cdc_.bytesSent += *n;
                cdc_.unannounced += *n;
            }
        }
        if (cdc_.announceNow(hold, behind || announcing(), corkLimit())) {
            announce(data.size() - (n ? *n : 0));
            announced = true;
        } else if (cdc_.unannounced > 0) {
            cdc_.held = hold;
        }
    }
    if (announced)
        deliver();
    return n;
}

Result<std::size_t> CdcConnection::copyOut(std::span<const std::byte> data, Deadline deadline,
                                           bool nonBlocking)
{
    for (;;) {
        std::size_t space = 0;
        cdc::Cursor at;
        {
            MutexLocker lock(mutex_);
            for (;;) {
                Result<std::uint64_t> mark = look();
                if (!mark)
                    return mark.error();
                if (std::error_code refused = cdc_.sendRefusal())
                    return refused;
                if (data.empty())
                    return std::size_t{0};
                space = cdc_.stream.sendSpace();
                at = cdc_.stream.producer();
                if (sendStalled())
                    space = 0; // nothing goes until the transport can write again
                else if (space > 0 || !blockedSent_)
                    break;
                if (Result<void> w = waitPast(lock, *mark, deadline, nonBlocking, false); !w)
                    return w.error();
            }
        }
        if (space == 0) { // write_blocked: the peer answers with its consumer cursor
            {
                MutexLocker tx(txMutex_);
                {
                    MutexLocker lock(mutex_);
                    if (cdc_.closed || cdc_.aborted)
                        continue; // the loop says which
                    announce(data.size());
                }
                deliver();
            }
            continue;
        }
        const std::size_t n = std::min({space, data.size(), putLimit()});
        if (Result<void> put = this->put(at.count, data.first(n), deadline, nonBlocking); !put) {
            MutexLocker lock(mutex_);
            return cdc_.closed ? errc(std::errc::not_connected) : put.error();
        }
        return n;
    }
}

Result<void> CdcConnection::flush()
{
    MutexLocker tx(txMutex_);
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return errc(std::errc::not_connected);
        if (cdc_.aborted || cdc_.unannounced == 0)
            return {};
        announce();
    }
    deliver();
    return {};
}

Result<void> CdcConnection::shutdownWrite()
{
    MutexLocker tx(txMutex_);
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return errc(std::errc::not_connected);
        if (cdc_.aborted)
            return {};
        absorb();
        // Sent bytes reach the peer's ring before the CDC that announces them: nothing to drain.
        if (!act(cdc_.close.shutdownWrite()))
            return {};
    }
    deliver();
    return {};
}

// --- Receive -----------------------------------------------------------------------------

Result<std::size_t> CdcConnection::awaitReadable(Deadline deadline, bool nonBlocking, bool block,
                                                 cdc::Cursor& at)
{
    MutexLocker lock(mutex_);
    for (;;) {
        Result<std::uint64_t> mark = look();
        if (!mark)
            return mark.error();
        if (viewOut_ > 0)
            return errc(std::errc::operation_in_progress);
        const std::size_t available = cdc_.stream.readable();
        at = cdc_.stream.consumer();
        if (available > 0)
            return available;
        if (std::optional<Result<std::size_t>> end = cdc_.endOfStream())
            return *end;
        if (!block)
            return std::size_t{0};
        if (Result<void> w = waitPast(lock, *mark, deadline, nonBlocking, true); !w)
            return w.error();
    }
}

Result<void> CdcConnection::consumed(std::size_t n)
{
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return errc(std::errc::not_connected);
        (void)cdc_.stream.consume(n); // n <= what it reported readable, and only we consume
        cdc_.bytesReceived += n;
        if (cdc_.aborted || !cdc_.stream.wantConsumerUpdate())
            return {}; // most receives: no window update, no txMutex_
    }
    MutexLocker tx(txMutex_);
    {
        MutexLocker lock(mutex_);
        // Looked at again: a CDC that went out meanwhile may have carried the update.
        if (cdc_.closed || cdc_.aborted || !cdc_.stream.wantConsumerUpdate())
            return {};
        announce();
    }
    deliver();
    return {};
}

Result<std::size_t> CdcConnection::recv(std::span<std::byte> into, Deadline deadline,
                                        bool nonBlocking)
{
    return receive(into, deadline, nonBlocking, true);
}

Result<std::size_t> CdcConnection::peek(std::span<std::byte> into, Deadline deadline,
                                        bool nonBlocking)
{
    return receive(into, deadline, nonBlocking, false);
}

Result<std::size_t> CdcConnection::receive(std::span<std::byte> into, Deadline deadline,
                                           bool nonBlocking, bool consume)
{
    MutexLocker receiving(recvMutex_);
    cdc::Cursor at;
    Result<std::size_t> available = awaitReadable(deadline, nonBlocking, !into.empty(), at);
    if (!available || *available == 0 || into.empty())
        return available ? Result<std::size_t>(std::size_t{0}) : available;
    const std::size_t n = std::min(*available, into.size());
    if (Result<void> took = take(at.count, into.first(n)); !took) {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return errc(std::errc::not_connected);
        (void)abort(false); // the transport lost our ring under us
        return errc(std::errc::connection_reset);
    }
    if (consume)
        if (Result<void> r = consumed(n); !r)
            return r.error();
    return n;
}

Result<RecvView> CdcConnection::recvView(std::span<std::byte> copy, std::size_t threshold,
                                         Deadline deadline, bool nonBlocking)
{
    if (!hasViews())
        return copiedView(
            copy, [&](std::span<std::byte> into) { return recv(into, deadline, nonBlocking); });
    MutexLocker receiving(recvMutex_);
    cdc::Cursor at;
    Result<std::size_t> available = awaitReadable(deadline, nonBlocking, true, at);
    if (!available)
        return available.error();
    // Open, and close() lets go of the ring only after it has recvMutex_.
    const std::span<const std::byte> ring = ownRing();
    RecvView v;
    if (*available == 0)
        return v;
    if (*available < threshold && !copy.empty()) { // a short read: copied, as recv does
        v.copied = cdc::copyFromRing(ring, at.count, copy.first(std::min(*available, copy.size())));
        if (Result<void> r = consumed(v.copied); !r)
            return r.error();
        return v;
    }
    // The peer writes only past our consumer cursor, which stays put until releaseView():
    // the view is ours alone until then.
    const auto pieces = cdc::ringPieces(ring, at.count, *available);
    v.view[0] = pieces[0];
    if (pieces[1].size() >= threshold) {
        v.view[1] = pieces[1];
    } else { // the straggler past the wrap
        v.copied = std::min(pieces[1].size(), copy.size());
        if (v.copied > 0)
            std::memcpy(copy.data(), pieces[1].data(), v.copied);
    }
    MutexLocker lock(mutex_);
    if (cdc_.closed)
        return errc(std::errc::not_connected);
    viewOut_ = v.size();
    return v;
}

Result<void> CdcConnection::releaseView()
{
    MutexLocker receiving(recvMutex_); // close() lets go of the buffers after us
    std::size_t out = 0;
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return errc(std::errc::not_connected);
        if (viewOut_ == 0)
            return errc(std::errc::invalid_argument);
        out = std::exchange(viewOut_, 0);
    }
    return consumed(out);
}

// --- Close -------------------------------------------------------------------------------

void CdcConnection::close() noexcept
{
    MutexLocker closing(closeMutex_);
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return;
        cdc_.closing = true; // a sender waiting for room leaves, none starts a copy
        wake();
    }
    // A copy under way ends before the peer can see us closed: a peer that reuses its buffer
    // once we said so (kept DMBs) must get no byte of ours after that.
    MutexLocker sending(sendMutex_);
    {
        MutexLocker tx(txMutex_);
        {
            MutexLocker lock(mutex_); // closed is ours to set: none came between (closeMutex_)
            absorb();
            bool sent = false;
            if (!cdc_.aborted) // unread bytes: the peer must not think they arrived (Linux: abort)
                sent = act(cdc_.close.close(cdc_.stream.readable() > 0));
            if (!sent && owesCdc())
                announce();
            cdc_.closed = true;
            wake(); // our own waiters see closed and leave
        }
        deliver(); // also when nothing was staged: it wakes the peer
    }
    detach();
    // No copy into or out of the buffers runs once all three are ours, and none will.
    MutexLocker receiving(recvMutex_);
    MutexLocker tx(txMutex_);
    release();
}

// Only the CDC of close(), under the two locks that build and send it, each tried: a sender
// or receiver of another thread may go on (the process ends under them), one of this thread
// that a signal handler interrupted must not be waited for.
bool CdcConnection::endAtExit() noexcept
{
    if (!txMutex_.tryLock())
        return false;
    if (!mutex_.tryLock()) {
        txMutex_.unlock();
        return false;
    }
    if (!cdc_.closed && !cdc_.closing) {
        absorb();
        bool sent = false;
        if (!cdc_.aborted)
            sent = act(cdc_.close.close(cdc_.stream.readable() > 0));
        if (!sent && owesCdc())
            announce();
        // No byte goes after the CDC that ends the stream: a send of another thread that is
        // still copying finds the connection closed; the buffers stay until the process goes.
        cdc_.closing = cdc_.closed = true;
        wake();
    }
    mutex_.unlock();
    deliver();
    txMutex_.unlock();
    return true;
}

// --- Readiness ---------------------------------------------------------------------------

template <typename Verdict> bool CdcConnection::probe(Verdict verdict) const
{
    MutexLocker lock(mutex_);
    if (cdc_.closed || cdc_.aborted)
        return true;
    cdc::CdcStream s = cdc_.stream; // what a call would see, without taking it in
    if (!peek(s))
        return true; // the call will report the abort
    return verdict(s);
}

bool CdcConnection::readable() const
{
    return probe([](const cdc::CdcStream& s) { return CdcState::readable(s); });
}

std::size_t CdcConnection::unread() const
{
    MutexLocker lock(mutex_);
    if (cdc_.closed || cdc_.aborted)
        return 0;
    cdc::CdcStream s = cdc_.stream;
    return peek(s) ? s.readable() : 0;
}

bool CdcConnection::abandoned() const
{
    return probe([](const cdc::CdcStream& s) { return CdcState::abandoned(s); });
}

bool CdcConnection::writable() const
{
    return probe([this](const cdc::CdcStream& s) SMC_REQUIRES(mutex_) { return canSend(s); });
}

bool CdcConnection::canSend(const cdc::CdcStream& s) const
{
    return cdc_.stream.sentConnFlags().any() || s.peerConnFlags().any() ||
           (s.sendSpace() > 0 && !sendStalled());
}

DataPath::Readiness CdcConnection::readiness() const
{
    Readiness r{true, true}; // closed, aborted, or an abort to report: both calls answer at once
    (void)probe([&](const cdc::CdcStream& s) SMC_REQUIRES(mutex_) {
        r = {CdcState::readable(s), canSend(s)};
        return true;
    });
    return r;
}

void CdcConnection::fillInfo(ConnectionInfo& info) const
{
    describe(info);
    MutexLocker lock(mutex_);
    cdc_.fill(info);
}

} // namespace smc::net
