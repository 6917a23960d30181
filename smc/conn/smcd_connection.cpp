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
// In the wait word, whose rest counts sleepers (bits 0..14) and receives waiting, asleep or
// spinning (bits 15..29).
constexpr std::uint32_t kWantsEvent = 1u << 31;
constexpr std::uint32_t kWantsRoom = 1u << 30;
constexpr std::uint32_t kSleeper = 1;
constexpr std::uint32_t kSleepers = 0x7fff;
constexpr std::uint32_t kReceiver = 1u << 15;
constexpr std::uint32_t kReceivers = 0x7fffu << 15;
// The pulse word (smcd_connection.h): the reader's position << 8 | pulses promised.
constexpr std::size_t kPulseOffset = 4;
constexpr std::uint32_t kPromised = 0xff;
// Far fewer than fill the ready socket's queue, so a promised pulse always fits.
constexpr std::uint32_t kMaxPromised = 64;

// A position in the stream as the pulse word keeps it: the bytes before it, modulo 2^24. The
// first bytes after the reader's position end at most a ring further (kMaxPulseRing), so
// they never look read.
constexpr std::uint32_t position(std::uint64_t bytes) noexcept
{
    return static_cast<std::uint32_t>(bytes) & 0xffffff;
}
constexpr std::size_t kMaxPulseRing = std::size_t{1} << 23;

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
                                                               std::size_t autocorkBytes,
                                                               SignalPolicy onSignal)
{
    Result<cdc::CdcStream> stream = std::make_error_code(std::errc::invalid_argument);
    if (setup.rmb->size() > kHead && setup.peer.size() > kHead)
        stream = cdc::CdcStream::create(setup.rmb->size() - kHead, setup.peer.size() - kHead);
    if (!stream)
        return std::make_error_code(std::errc::invalid_argument); // setup gives its DMB back
    return std::unique_ptr<SmcdConnection>(
        new SmcdConnection(device, std::move(setup), *stream, busyPoll, autocorkBytes, onSignal));
}

SmcdConnection::SmcdConnection(ShmIsm& device, SmcdSetup setup, cdc::CdcStream stream,
                               std::chrono::microseconds busyPoll, std::size_t autocorkBytes,
                               SignalPolicy onSignal)
    : CdcConnection(stream, autocorkBytes, onSignal),
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
    changes_.bytes |= m.producer != staged_.producer;
    changes_.flags |= !(m.connFlags == staged_.connFlags);
    changes_.room |= m.consumer != staged_.consumer;
    staged_ = m;
    stagedBytes_ = cdc_.bytesSent; // what this CDC's producer cursor says: all we sent
}

void SmcdConnection::deliver()
{
    ringPeer(std::exchange(changes_, Changes{}));
}

void SmcdConnection::ringPeer(Changes c) noexcept
{
    // Dekker with the sleeper: our bump, then its word; it sets its word, then reads the bump.
    word(peerHead(), kSeqOffset).fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t wait = word(peerHead(), kWaitOffset).load(std::memory_order_seq_cst);
    if ((wait & kWantsEvent) != 0) {
        // A CDC that changed none of the three (write_blocked, a wake-up) rings: only the
        // executor's look can tell what it means for readiness.
        bool ring =
            c.flags || (c.room && (wait & kWantsRoom) != 0) || (!c.bytes && !c.flags && !c.room);
        // The pulse before the sleeper's wake-up: a reader that wakes and empties its ring
        // then finds the pulse there, instead of waiting for it. A receive waiting takes the
        // bytes itself (at the wake-up below, or spinning) and then says what is left
        // readable: the program's descriptor needs no signal (a blocking reader, as
        // sockperf's, never gets one).
        if (c.bytes && !ring && (wait & kReceivers) == 0)
            ring = !pulse();
        if (ring)
            setup_.peer.signal();
    }
    if ((wait & kSleepers) != 0)
        futex(peerHead(), FUTEX_WAKE, INT_MAX, nullptr);
}

// Promises, then sends, the pulse for the bytes staged last, unless the peer's reader had
// read up to them when it last found its ring empty. False: the doorbell must say it instead.
bool SmcdConnection::pulse() noexcept
{
    auto w = word(peerHead(), kPulseOffset);
    std::uint32_t v = w.load(std::memory_order_seq_cst);
    // The word first: its owner offers before it turns pulses on.
    if ((v & kPromised) >= kMaxPromised || !setup_.peer.canPulse())
        return false; // off, or plenty queued
    const std::uint32_t produced = position(stagedBytes_);
    do {
        if ((v & kPromised) >= kMaxPromised)
            return false;
        if ((v >> 8) == produced)
            return true; // its reader took these bytes already
    } while (!w.compare_exchange_weak(v, v + 1, std::memory_order_seq_cst));
    return setup_.peer.pulse(); // if not, the promise stays unkept and the reader stops pulses
}

// --- Waiting on our doorbell --------------------------------------------------------------

std::uint64_t SmcdConnection::waitMark() const
{
    return word(ownHead(), kSeqOffset).load(std::memory_order_seq_cst);
}

void SmcdConnection::wake()
{
    // As ringPeer: the bump, then the sleepers; no system call when nobody sleeps. Our own
    // count, not the wait word: the peer may write that, and our wake-ups (close, the peer's
    // death) must not depend on it.
    word(ownHead(), kSeqOffset).fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) != 0)
        futex(ownHead(), FUTEX_WAKE, INT_MAX, nullptr);
}

bool SmcdConnection::wait(MutexLocker& /*lock*/, std::uint64_t mark, Deadline until, bool forBytes)
{
    const auto seen = static_cast<std::uint32_t>(mark);
    timespec ts{};
    const timespec* timeout = nullptr;
    if (!sleepLimit(until, ts, timeout))
        return false;
    mutex_.unlock(); // the peer's doorbell needs no lock of ours; the sender or receiver may run
    auto waiting = word(ownHead(), kWaitOffset);
    // A receive says so for its whole wait, spinning or asleep: the writer then sends no
    // pulse for bytes (ringPeer), which this receive takes itself.
    if (forBytes)
        waiting.fetch_add(kReceiver, std::memory_order_seq_cst);
    // A short spin first: a peer that answers within microseconds (a ping-pong, a ring
    // drained by a running reader) is seen without a futex round trip and two context
    // switches; past busyPoll_ we sleep, so an idle connection costs no CPU.
    bool rung = false;
    bool interrupted = false;
    const auto spinUntil = std::min(until, Clock::now() + busyPoll_);
    while (!rung && Clock::now() < spinUntil) {
        rung = word(ownHead(), kSeqOffset).load(std::memory_order_acquire) != seen;
        __builtin_ia32_pause();
    }
    if (!rung) {
        // Counted for the peer's wake-up (the wait word) and for our own (sleepers_).
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        waiting.fetch_add(kSleeper, std::memory_order_seq_cst);
        if (word(ownHead(), kSeqOffset).load(std::memory_order_seq_cst) == seen)
            interrupted = futex(ownHead(), FUTEX_WAIT, seen, timeout) != 0 && errno == EINTR;
        waiting.fetch_sub(kSleeper, std::memory_order_seq_cst);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    }
    if (forBytes)
        waiting.fetch_sub(kReceiver, std::memory_order_seq_cst);
    mutex_.lock();
    return interrupted;
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
    if (pulsing_.load(std::memory_order_relaxed))
        device_.dropOffers(shown_.dmbToken); // one the peer never took stays in flight
    if (!clean) {
        setup_.rmb.reset();
        setup_.peer = RemoteDmb();
        return;
    }
    setup_.rmb.reset(&setup_.peerGid);
    device_.keepRemote(setup_.peerGid, std::move(setup_.peer));
}

int SmcdConnection::enableEvents(int pulse) noexcept
{
    MutexLocker lock(mutex_);
    if (cdc_.closed) { // our DMB may be gone: closed reads as readable and writable anyway
        errno = ENOTCONN;
        return -1;
    }
    if (!eventsWanted_) {
        eventsWanted_ = true;
        pulseFd_ = pulse;
        word(ownHead(), kPulseOffset).store(kPromised, std::memory_order_seq_cst); // off
        word(ownHead(), kWaitOffset).fetch_or(kWantsEvent, std::memory_order_seq_cst);
    }
    return device_.signalFd(shown_.dmbToken);
}

bool SmcdConnection::startPulses() noexcept
{
    MutexLocker lock(mutex_);
    if (pulsing_.load(std::memory_order_relaxed))
        return true;
    // Offered before the word says "on": a peer that sees it on finds the offer.
    // Not for a peer that is done (nobody would take the offer), nor a ring where positions
    // could alias.
    if (cdc_.closed || pulseFd_ < 0)
        return false;
    absorb();
    if (cdc_.stream.peerConnFlags().any() || cdc_.stream.ringSize() >= kMaxPulseRing ||
        !device_.offer(shown_.dmbToken, pulseFd_))
        return false;
    word(ownHead(), kPulseOffset)
        .store(position(cdc_.bytesReceived) << 8, std::memory_order_seq_cst);
    pulsing_.store(true, std::memory_order_relaxed);
    return true;
}

std::optional<unsigned> SmcdConnection::settlePulses() noexcept
{
    MutexLocker lock(mutex_);
    if (cdc_.closed || !pulsing_.load(std::memory_order_relaxed))
        return std::nullopt;
    absorb();
    if (cdc_.stream.readable() > 0)
        return std::nullopt;
    // Read up to here: a writer that staged no further sends no pulse from now on.
    return word(ownHead(), kPulseOffset)
               .exchange(position(cdc_.bytesReceived) << 8, std::memory_order_seq_cst) &
           kPromised;
}

bool SmcdConnection::pulsesPromised() const noexcept
{
    MutexLocker lock(mutex_);
    return !cdc_.closed &&
           (word(ownHead(), kPulseOffset).load(std::memory_order_seq_cst) & kPromised) != 0;
}

void SmcdConnection::stopPulses() noexcept
{
    MutexLocker lock(mutex_);
    pulsing_.store(false, std::memory_order_relaxed);
    if (!cdc_.closed)
        word(ownHead(), kPulseOffset).store(kPromised, std::memory_order_seq_cst);
}

void SmcdConnection::awaitRoom(bool on) noexcept
{
    MutexLocker lock(mutex_);
    if (cdc_.closed || std::exchange(roomWanted_, on) == on)
        return;
    // seq_cst: set before the caller looks at the room again (Dekker with ringPeer).
    if (on)
        word(ownHead(), kWaitOffset).fetch_or(kWantsRoom, std::memory_order_seq_cst);
    else
        word(ownHead(), kWaitOffset).fetch_and(~kWantsRoom, std::memory_order_seq_cst);
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
    info.pulses = pulsing_.load(std::memory_order_relaxed);
}

} // namespace smc::net
