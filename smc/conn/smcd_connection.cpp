// SPDX-License-Identifier: MIT
// The SMC-D data path across processes: copy into the peer's ring, publish the CDC, ring.
#include "smc/conn/smcd_connection.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

Result<std::unique_ptr<SmcdConnection>> SmcdConnection::create(ShmIsm& device, SmcdSetup setup,
                                                               std::chrono::microseconds busyPoll,
                                                               std::size_t autocorkBytes)
{
    Result<cdc::CdcStream> stream = std::make_error_code(std::errc::invalid_argument);
    if (setup.rmb->size() > kHead && setup.peer.size() > kHead)
        stream = cdc::CdcStream::create(setup.rmb->size() - kHead, setup.peer.size() - kHead);
    if (!stream)
        return std::make_error_code(std::errc::invalid_argument); // setup gives its DMB back
    return std::unique_ptr<SmcdConnection>(
        new SmcdConnection(device, std::move(setup), *stream, busyPoll, autocorkBytes));
}

SmcdConnection::SmcdConnection(ShmIsm& device, SmcdSetup setup, cdc::CdcStream stream,
                               std::chrono::microseconds busyPoll, std::size_t autocorkBytes)
    : CdcConnection(stream, autocorkBytes),
      device_(device), shown_{setup.rmb->size(), setup.peer.size(), setup.rmb->dmbToken(),
                              setup.peer.token()},
      setup_(std::move(setup)), busyPoll_(busyPoll)
{
}

SmcdConnection::~SmcdConnection()
{
    close();
}

std::span<const std::byte> SmcdConnection::ownRing() const noexcept
{
    return {ownDmb()->data() + kHead, ownDmb()->size() - kHead};
}

std::span<std::byte> SmcdConnection::peerRing() const noexcept
{
    return {setup_.peer.data() + kHead, setup_.peer.size() - kHead};
}

// --- CDCs: read from our head, written into the peer's ------------------------------------

void SmcdConnection::absorb()
{
    if (cdc_.aborted)
        return;
    if (!receive(cdc::readSmcd(ownHead())) && abort(true)) {
        // A cursor out of range or backwards: the peer broke the protocol. Our head in its
        // DMB says so (no ring: it sees it on its next look, or when our socket closes).
        cdc::publishSmcd(peerHead(), cdc_.stream.nextCdc());
        cdc_.unannounced = 0;
    }
}

bool SmcdConnection::peek(cdc::CdcStream& s) const
{
    return s.onPeerCdc(cdc::readSmcd(ownHead())).has_value();
}

void SmcdConnection::stage(const cdc::CdcMessage& m)
{
    cdc::publishSmcd(peerHead(), m);
}

void SmcdConnection::deliver()
{
    ringPeer();
}

void SmcdConnection::ringPeer() noexcept
{
    // Dekker with the sleeper: our bump, then its word; it sets its word, then reads the bump.
    word(peerHead(), kSeqOffset).fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t wait = word(peerHead(), kWaitOffset).load(std::memory_order_seq_cst);
    if ((wait & ~kWantsEvent) != 0)
        futex(peerHead(), FUTEX_WAKE, INT_MAX, nullptr);
    if (wait & kWantsEvent)
        setup_.peer.signal();
}

// --- Waiting on our doorbell --------------------------------------------------------------

std::uint64_t SmcdConnection::waitMark() const
{
    return word(ownHead(), kSeqOffset).load(std::memory_order_seq_cst);
}

void SmcdConnection::wake()
{
    word(ownHead(), kSeqOffset).fetch_add(1, std::memory_order_seq_cst);
    futex(ownHead(), FUTEX_WAKE, INT_MAX, nullptr);
}

void SmcdConnection::wait(MutexLocker& /*lock*/, std::uint64_t mark, Deadline until)
{
    const auto seen = static_cast<std::uint32_t>(mark);
    timespec ts{};
    const timespec* timeout = nullptr;
    if (until != Deadline::max()) {
        const auto left = until - Clock::now();
        if (left <= Clock::duration::zero())
            return;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
        ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
        timeout = &ts;
    }
    mutex_.unlock(); // the peer's doorbell needs no lock of ours; the sender or receiver may run
    // A short spin first: a peer that answers within microseconds (a ping-pong, a ring
    // drained by a running reader) is seen without a futex round trip and two context
    // switches; past busyPoll_ we sleep, so an idle connection costs no CPU.
    bool rung = false;
    const auto spinUntil = std::min(until, Clock::now() + busyPoll_);
    while (!rung && Clock::now() < spinUntil) {
        rung = word(ownHead(), kSeqOffset).load(std::memory_order_acquire) != seen;
        __builtin_ia32_pause();
    }
    if (!rung) {
        auto sleepers = word(ownHead(), kWaitOffset);
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        if (word(ownHead(), kSeqOffset).load(std::memory_order_seq_cst) == seen)
            futex(ownHead(), FUTEX_WAIT, seen, timeout); // EAGAIN, EINTR, ETIMEDOUT: re-check
        sleepers.fetch_sub(1, std::memory_order_seq_cst);
    }
    mutex_.lock();
}

// --- Bytes: plain copies into the peer's ring and out of ours ----------------------------

Result<void> SmcdConnection::put(std::size_t at, std::span<const std::byte> bytes,
                                 Deadline /*deadline*/, bool /*nonBlocking*/)
{
    cdc::copyToRing(peerRing(), at, bytes);
    return {};
}

Result<void> SmcdConnection::take(std::size_t at, std::span<std::byte> into)
{
    cdc::copyFromRing(ownRing(), at, into);
    return {};
}

// --- The end -------------------------------------------------------------------------------

void SmcdConnection::peerGone() noexcept
{
    MutexLocker lock(mutex_);
    if (cdc_.closed)
        return;
    absorb();
    const cdc::ConnFlags f = cdc_.stream.peerConnFlags();
    if (!f.peerConnClosed && !f.peerConnAbort)
        (void)abort(false); // died without a word: nothing more will come
    wake();
}

void SmcdConnection::release() noexcept
{
    // After a clean end both mappings may serve the next connection between the two
    // processes: ours stays granted to the peer (the stack decides), theirs is kept here.
    // Nothing of ours writes into either any more (close() let the last copy end before it
    // said so). After an abort (the peer died or broke the rules) neither is kept.
    bool clean = false;
    {
        MutexLocker lock(mutex_);
        clean = !cdc_.aborted;
    }
    if (!clean) {
        setup_.rmb.reset();
        setup_.peer = RemoteDmb();
        return;
    }
    setup_.rmb.reset(&setup_.peerGid);
    device_.keepRemote(setup_.peerGid, std::move(setup_.peer));
}

int SmcdConnection::enableEvents() noexcept
{
    MutexLocker lock(mutex_);
    if (cdc_.closed) { // our DMB may be gone: closed reads as readable and writable anyway
        errno = ENOTCONN;
        return -1;
    }
    if (!eventsWanted_) {
        eventsWanted_ = true;
        word(ownHead(), kWaitOffset).fetch_or(kWantsEvent, std::memory_order_seq_cst);
    }
    return device_.signalFd(shown_.dmbToken);
}

void SmcdConnection::drainEvents() noexcept
{
    (void)device_.drainSignals(shown_.dmbToken); // a revoked token just has nothing to drain
}

void SmcdConnection::describe(ConnectionInfo& info) const
{
    info.transport = Transport::SmcD;
    info.version = 2;
    info.rmbBytes = shown_.rmbBytes;
    info.peerRmbBytes = shown_.peerRmbBytes;
    info.dmbToken = shown_.dmbToken;
    info.peerDmbToken = shown_.peerDmbToken;
}

} // namespace smc::net
