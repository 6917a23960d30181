// SPDX-License-Identifier: MIT
// The SMC-D data path across processes: copy into the peer's ring, publish the CDC, ring.
#include "smc/socket/smcd_connection.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include "smc/cdc/cdc_ring.h"
#include "smc/ism/shm_ism.h"

namespace smc::net
{
namespace
{

constexpr std::size_t kHead = 32; // the CDC at the head of every DMB
constexpr std::size_t kSeqOffset = cdc::kSmcdDoorbellOffset;
constexpr std::size_t kWaitOffset = cdc::kSmcdDoorbellOffset + 4;
constexpr std::uint32_t kWantsEvent = 1u << 31; // in the wait word; the rest counts sleepers

std::atomic_ref<std::uint32_t> word(std::byte* head, std::size_t offset) noexcept
{
    return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(head + offset));
}

long futex(std::byte* head, int op, std::uint32_t value, const timespec* timeout) noexcept
{
    // Not FUTEX_PRIVATE: the word is in memory another process maps.
    return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(head + kSeqOffset), op, value,
                     timeout, nullptr, 0);
}

} // namespace

Result<std::unique_ptr<SmcdConnection>> SmcdConnection::create(SmcStack& stack, SmcdSetup setup,
                                                               std::chrono::microseconds busyPoll,
                                                               std::size_t autocorkBytes)
{
    Result<cdc::CdcStream> stream = std::make_error_code(std::errc::invalid_argument);
    if (setup.rmb->size() > kHead && setup.peer.size() > kHead)
        stream = cdc::CdcStream::create(setup.rmb->size() - kHead, setup.peer.size() - kHead);
    if (!stream) {
        releaseRmb(stack, setup.rmb);
        return std::make_error_code(std::errc::invalid_argument);
    }
    return std::unique_ptr<SmcdConnection>(
        new SmcdConnection(stack, std::move(setup), *stream, busyPoll, autocorkBytes));
}

SmcdConnection::SmcdConnection(SmcStack& stack, SmcdSetup setup, cdc::CdcStream stream,
                               std::chrono::microseconds busyPoll, std::size_t autocorkBytes)
    : stack_(stack), rmb_(setup.rmb), peer_(std::move(setup)), busyPoll_(busyPoll),
      cdc_(stream, autocorkBytes)
{
}

SmcdConnection::~SmcdConnection()
{
    close();
}

std::span<std::byte> SmcdConnection::ownRing() const noexcept
{
    return {rmb_->data() + kHead, rmb_->size() - kHead};
}

std::span<std::byte> SmcdConnection::peerRing() const noexcept
{
    return {peer_.peer.data() + kHead, peer_.peer.size() - kHead};
}

std::uint32_t SmcdConnection::doorbellSeen() const noexcept
{
    return word(ownHead(), kSeqOffset).load(std::memory_order_seq_cst);
}

void SmcdConnection::absorb()
{
    if (cdc_.aborted)
        return;
    const cdc::ConnFlags before = cdc_.stream.peerConnFlags();
    if (!cdc_.stream.onPeerCdc(cdc::readSmcd(ownHead()))) {
        abort(); // a cursor out of range or backwards: the peer broke the protocol
        return;
    }
    if (!(cdc_.stream.peerConnFlags() == before))
        act(cdc_.close.peerFlags(cdc_.stream.peerConnFlags()));
}

void SmcdConnection::publish(std::size_t pending)
{
    cdc::publishSmcd(peerHead(), cdc_.stream.nextCdc(pending));
    cdc_.unannounced = 0;
}

bool SmcdConnection::settle(bool hold, bool behind, std::size_t pending)
{
    if (!cdc_.announceNow(hold, behind))
        return false;
    publish(pending);
    return true;
}

void SmcdConnection::act(const cdc::CloseAction& action)
{
    if (!action.sends())
        return;
    cdc_.stream.addConnFlags(action.send);
    publish();
}

bool SmcdConnection::peerClosed() const
{
    const cdc::ConnFlags f = cdc_.stream.peerConnFlags();
    return f.peerConnClosed || f.peerConnAbort;
}

void SmcdConnection::abort()
{
    if (cdc_.aborted)
        return;
    cdc_.aborted = true;
    cdc_.close.abort();
    // Tell the peer, as Linux's abort does; nothing else will reach it from us.
    cdc_.stream.addConnFlags({.peerConnAbort = true});
    publish();
}

void SmcdConnection::ringPeer() noexcept
{
    // Dekker with the sleeper: our bump, then its word; it sets its word, then reads the bump.
    word(peerHead(), kSeqOffset).fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t wait = word(peerHead(), kWaitOffset).load(std::memory_order_seq_cst);
    if ((wait & ~kWantsEvent) != 0)
        futex(peerHead(), FUTEX_WAKE, INT_MAX, nullptr);
    if (wait & kWantsEvent)
        peer_.peer.signal();
}

void SmcdConnection::wakeOwn() noexcept
{
    word(ownHead(), kSeqOffset).fetch_add(1, std::memory_order_seq_cst);
    futex(ownHead(), FUTEX_WAKE, INT_MAX, nullptr);
}

Result<void> SmcdConnection::wait(std::uint32_t seen, Deadline deadline) noexcept
{
    timespec ts{};
    const timespec* timeout = nullptr;
    if (deadline != Deadline::max()) {
        const auto left = deadline - Clock::now();
        if (left <= Clock::duration::zero())
            return std::make_error_code(std::errc::timed_out);
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
        ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
        timeout = &ts;
    }
    // A short spin first: a peer that answers within microseconds (a ping-pong, a ring
    // drained by a running reader) is seen without a futex round trip and two context
    // switches; past busyPoll_ we sleep, so an idle connection costs no CPU.
    const auto spinUntil = std::min(deadline, Clock::now() + busyPoll_);
    while (Clock::now() < spinUntil) {
        if (word(ownHead(), kSeqOffset).load(std::memory_order_acquire) != seen)
            return {};
        __builtin_ia32_pause();
    }
    auto sleepers = word(ownHead(), kWaitOffset);
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (word(ownHead(), kSeqOffset).load(std::memory_order_seq_cst) == seen)
        futex(ownHead(), FUTEX_WAIT, seen, timeout); // EAGAIN, EINTR, ETIMEDOUT: re-check
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    return {};
}

Result<std::size_t> SmcdConnection::send(std::span<const std::byte> data, Deadline deadline,
                                         bool nonBlocking, bool hold)
{
    queued_.fetch_add(1, std::memory_order_acq_rel);
    MutexLocker sending(sendMutex_);
    Result<std::size_t> n = sendHeld(data, deadline, nonBlocking);
    // A sender that counted itself before this returns will take sendMutex_ after us and
    // settle in turn: the last of a queue never leaves bytes unannounced (unless held).
    const bool behind = queued_.fetch_sub(1, std::memory_order_acq_rel) > 1;
    bool ring = false;
    {
        MutexLocker lock(mutex_);
        ring = settle(hold, behind, data.size() - (n ? *n : 0));
    }
    if (ring)
        ringPeer();
    return n;
}

Result<std::size_t> SmcdConnection::sendHeld(std::span<const std::byte> data, Deadline deadline,
                                             bool nonBlocking)
{
    std::size_t space = 0;
    cdc::Cursor at;
    for (;;) {
        std::uint32_t seen = doorbellSeen();
        {
            MutexLocker lock(mutex_);
            if (cdc_.closed)
                return std::make_error_code(std::errc::not_connected);
            absorb();
            if (std::error_code refused = cdc_.sendRefusal())
                return refused;
            if (data.empty())
                return std::size_t{0};
            space = cdc_.stream.sendSpace();
            at = cdc_.stream.producer();
            if (space == 0) {
                publish(data.size()); // write_blocked: the peer answers with its cursor
                ringPeer();
            }
        }
        if (space > 0)
            break;
        if (nonBlocking)
            return std::make_error_code(std::errc::resource_unavailable_try_again);
        if (Result<void> r = wait(seen, deadline); !r)
            return r.error();
        if (Clock::now() >= deadline)
            return std::make_error_code(std::errc::timed_out);
    }
    const std::size_t n = std::min(space, data.size());
    cdc::copyToRing(peerRing(), at.count, data.first(n));
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed || cdc_.aborted)
            return std::make_error_code(std::errc::connection_reset);
        (void)cdc_.stream.produce(n); // n <= the space it reported, and only we produce
        cdc_.bytesSent += n;
        cdc_.unannounced += n; // send() announces them, or leaves that to the next sender
    }
    return n;
}

Result<std::size_t> SmcdConnection::awaitReadable(Deadline deadline, bool nonBlocking,
                                                  cdc::Cursor& at)
{
    for (;;) {
        std::uint32_t seen = doorbellSeen();
        {
            MutexLocker lock(mutex_);
            if (cdc_.closed)
                return std::make_error_code(std::errc::not_connected);
            if (viewOut_ > 0)
                return std::make_error_code(std::errc::operation_in_progress);
            absorb();
            const std::size_t available = cdc_.stream.readable();
            at = cdc_.stream.consumer();
            if (available > 0)
                return available;
            if (std::optional<Result<std::size_t>> end = cdc_.endOfStream())
                return *end;
        }
        if (nonBlocking)
            return std::make_error_code(std::errc::resource_unavailable_try_again);
        if (Result<void> r = wait(seen, deadline); !r)
            return r.error();
        if (Clock::now() >= deadline)
            return std::make_error_code(std::errc::timed_out);
    }
}

bool SmcdConnection::consumed(std::size_t n)
{
    (void)cdc_.stream.consume(n); // n <= what it reported readable, and only we consume
    cdc_.bytesReceived += n;
    if (!cdc_.stream.wantConsumerUpdate())
        return false;
    publish();
    return true;
}

Result<std::size_t> SmcdConnection::recv(std::span<std::byte> into, Deadline deadline,
                                         bool nonBlocking)
{
    MutexLocker receiving(recvMutex_);
    if (into.empty()) {
        MutexLocker lock(mutex_);
        return cdc_.closed ? Result<std::size_t>(std::make_error_code(std::errc::not_connected))
                           : Result<std::size_t>(std::size_t{0});
    }
    cdc::Cursor at;
    Result<std::size_t> available = awaitReadable(deadline, nonBlocking, at);
    if (!available || *available == 0)
        return available;
    const std::size_t n = std::min(*available, into.size());
    cdc::copyFromRing(ownRing(), at.count, into.first(n));
    bool ring = false;
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return std::make_error_code(std::errc::not_connected);
        ring = consumed(n);
    }
    if (ring)
        ringPeer();
    return n;
}

Result<RecvView> SmcdConnection::recvView(std::span<std::byte> copy, std::size_t threshold,
                                          Deadline deadline, bool nonBlocking)
{
    MutexLocker receiving(recvMutex_);
    cdc::Cursor at;
    Result<std::size_t> available = awaitReadable(deadline, nonBlocking, at);
    if (!available)
        return available.error();
    RecvView v;
    if (*available == 0)
        return v;
    const std::span<const std::byte> ring = ownRing();
    if (*available < threshold && !copy.empty()) { // a short read: copied, as recv does
        v.copied = cdc::copyFromRing(ring, at.count, copy.first(std::min(*available, copy.size())));
        bool rung = false;
        {
            MutexLocker lock(mutex_);
            if (cdc_.closed)
                return std::make_error_code(std::errc::not_connected);
            rung = consumed(v.copied);
        }
        if (rung)
            ringPeer();
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
        return std::make_error_code(std::errc::not_connected);
    viewOut_ = v.size();
    return v;
}

Result<void> SmcdConnection::releaseView()
{
    MutexLocker receiving(recvMutex_); // close() releases the peer's mapping after us
    bool ring = false;
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return std::make_error_code(std::errc::not_connected);
        if (viewOut_ == 0)
            return std::make_error_code(std::errc::invalid_argument);
        ring = consumed(std::exchange(viewOut_, 0));
    }
    if (ring)
        ringPeer();
    return {};
}

Result<void> SmcdConnection::flush()
{
    MutexLocker lock(mutex_);
    if (cdc_.closed)
        return std::make_error_code(std::errc::not_connected);
    if (cdc_.aborted || cdc_.unannounced == 0)
        return {};
    publish();
    ringPeer(); // under the lock: close() must not drop the peer's mapping meanwhile
    return {};
}

Result<void> SmcdConnection::shutdownWrite()
{
    MutexLocker lock(mutex_);
    if (cdc_.closed)
        return std::make_error_code(std::errc::not_connected);
    if (cdc_.aborted)
        return {};
    absorb();
    act(cdc_.close.shutdownWrite()); // sends go out at once: nothing to drain
    ringPeer(); // under the lock: close() must not drop the peer's mapping meanwhile
    return {};
}

void SmcdConnection::peerGone() noexcept
{
    MutexLocker lock(mutex_);
    if (cdc_.closed)
        return;
    absorb();
    if (!peerClosed() && !cdc_.aborted) {
        cdc_.aborted = true; // died without a word: nothing more will come
        cdc_.close.abort();
    }
    wakeOwn();
}

void SmcdConnection::close() noexcept
{
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed)
            return;
        absorb();
        if (!cdc_.aborted) // unread bytes: the peer must not think they arrived (Linux: abort)
            act(cdc_.close.close(cdc_.stream.readable() > 0));
        cdc_.closed = true;
        ringPeer();
        wakeOwn(); // our own waiters see cdc_.closed and leave
    }
    // No copy into or out of the buffers is running once both are ours.
    MutexLocker sending(sendMutex_);
    MutexLocker receiving(recvMutex_);
    release();
}

void SmcdConnection::release() noexcept
{
    // The peer keeps its mapping of our DMB until it unmaps; revoke gives the pool a DMB
    // the old peer no longer reaches.
    releaseRmb(stack_, rmb_);
    peer_.peer = RemoteDmb();
}

bool SmcdConnection::readable() const
{
    MutexLocker lock(mutex_);
    if (cdc_.closed || cdc_.aborted)
        return true;
    cdc::CdcStream probe = cdc_.stream; // what recv would see, without taking it
    if (!probe.onPeerCdc(cdc::readSmcd(ownHead())))
        return true; // recv will report the abort
    return CdcState::readable(probe);
}

bool SmcdConnection::abandoned() const
{
    MutexLocker lock(mutex_);
    if (cdc_.closed || cdc_.aborted)
        return true;
    cdc::CdcStream probe = cdc_.stream;
    if (!probe.onPeerCdc(cdc::readSmcd(ownHead())))
        return true;
    return CdcState::abandoned(probe);
}

bool SmcdConnection::writable() const
{
    MutexLocker lock(mutex_);
    if (cdc_.closed || cdc_.aborted || cdc_.stream.sentConnFlags().any())
        return true;
    cdc::CdcStream probe = cdc_.stream;
    if (!probe.onPeerCdc(cdc::readSmcd(ownHead())))
        return true;
    return probe.sendSpace() > 0 || probe.peerConnFlags().any();
}

int SmcdConnection::enableEvents() noexcept
{
    MutexLocker lock(mutex_);
    if (!eventsWanted_) {
        eventsWanted_ = true;
        word(ownHead(), kWaitOffset).fetch_or(kWantsEvent, std::memory_order_seq_cst);
    }
    return stack_.device().signalFd(rmb_->dmbToken());
}

void SmcdConnection::drainEvents() noexcept
{
    (void)stack_.device().drainSignals(rmb_->dmbToken());
}

void SmcdConnection::fillInfo(ConnectionInfo& info) const
{
    MutexLocker lock(mutex_);
    info.transport = Transport::SmcD;
    info.version = 2;
    cdc_.fill(info);
    info.rmbBytes = rmb_->size();
    info.peerRmbBytes = peer_.peer.size();
    info.dmbToken = rmb_->dmbToken();
    info.peerDmbToken = peer_.peer.token();
}

} // namespace smc::net
