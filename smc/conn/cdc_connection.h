// SPDX-License-Identifier: MIT
// CdcConnection: the data path SMC-D and SMC-R share (send, receive, corking, close, readiness).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <limits>
#include <span>

#include "base/mutex.h"
#include "smc/conn/cdc_state.h"
#include "smc/conn/data_path.h"

namespace smc::net
{

// One SMC connection after CLC. Each side puts bytes into the other's ring, then a CDC
// announces them; what the peer announces is checked (CdcStream) before any byte of ours is
// read, so a peer that breaks the rules gets an abort, never a read outside our ring. The
// algorithm is written once here; a transport (SmcdConnection, SmcrConnection) supplies how
// bytes reach the peer's ring and leave ours, how a CDC reaches the peer, and how a waiter
// sleeps and is woken.
//
// One sender and one receiver may run at once, besides the transport's own threads.
// Lock order: closeMutex_, then sendMutex_ / recvMutex_, then txMutex_, then mutex_.
class CdcConnection : public DataPath
{
public:
    CdcConnection(const CdcConnection&) = delete;
    CdcConnection& operator=(const CdcConnection&) = delete;

    // DataPath. close(): the closing CDC (an abort when unread bytes are left), then the
    // transport lets go of its buffers once no copy runs; a second close() waits for the first.
    Result<std::size_t> send(std::span<const std::byte> data, Deadline deadline, bool nonBlocking,
                             bool hold) final;
    Result<std::size_t> recv(std::span<std::byte> into, Deadline deadline, bool nonBlocking) final;
    Result<std::size_t> peek(std::span<std::byte> into, Deadline deadline, bool nonBlocking) final;
    Result<RecvView> recvView(std::span<std::byte> copy, std::size_t threshold, Deadline deadline,
                              bool nonBlocking) final;
    Result<void> releaseView() final;
    Result<void> flush() final;
    Result<void> shutdownWrite() final;
    void close() noexcept final;
    bool endAtExit() noexcept final;
    bool readable() const final;
    std::size_t unread() const final;
    bool abandoned() const final;
    bool writable() const final;
    Readiness readiness() const final;
    void fillInfo(ConnectionInfo& info) const final;

protected:
    CdcConnection(cdc::CdcStream stream, std::size_t autocorkBytes, SignalPolicy onSignal = nullptr)
        : cdc_(stream, autocorkBytes), onSignal_(onSignal)
    {
    }
    ~CdcConnection() override = default; // a transport's destructor calls close()

    // --- What a transport supplies.
    // Takes in what the peer left for us, where the transport learns of it by looking (SMC-D:
    // the CDC in our DMB's head); a transport that is told (SMC-R) has nothing to do.
    virtual void absorb() SMC_REQUIRES(mutex_) {}
    // What readiness sees: `s`, a copy of the stream, with what absorb() would take in. False
    // if that breaks the rules (the next call reports the abort).
    virtual bool peek(cdc::CdcStream& s) const SMC_REQUIRES(mutex_)
    {
        (void)s;
        return true;
    }
    // A mark of the wake-ups so far; wait() returns after one past it or at `until`, with
    // mutex_ held again, and says whether a signal handler cut its sleep short (then it may
    // return before either). Taken before absorb(): nothing the peer does after it is missed.
    // `forBytes`: a receive waits, which says what is left readable once it returns.
    virtual std::uint64_t waitMark() const SMC_REQUIRES(mutex_) = 0;
    virtual bool wait(MutexLocker& lock, std::uint64_t mark, Deadline until, bool forBytes)
        SMC_REQUIRES(mutex_) = 0;
    // Wakes our own waiters and pollers.
    virtual void wake() SMC_REQUIRES(mutex_) = 0;
    // A CDC for the peer: staged under both locks, so CDCs leave in the order they were
    // built; deliver() then sends what was staged with mutex_ released.
    virtual void stage(const cdc::CdcMessage& m) SMC_REQUIRES(txMutex_, mutex_) = 0;
    virtual void deliver() SMC_REQUIRES(txMutex_) = 0;
    // Bytes for the peer's ring from offset `at` (wrapping), at most putLimit() at once: into
    // it at once (SMC-D), or gathered until deliver() writes them before their CDC (SMC-R).
    // Errors: the send's (the transport aborts the connection where it cannot go on).
    virtual Result<void> put(std::size_t at, std::span<const std::byte> bytes, Deadline deadline,
                             bool nonBlocking) = 0;
    virtual std::size_t putLimit() const noexcept
    {
        return std::numeric_limits<std::size_t>::max();
    }
    // Bytes out of our ring from offset `at` (wrapping). An error aborts the connection.
    virtual Result<void> take(std::size_t at, std::span<std::byte> into) = 0;
    // recv and peek: the copy out of our ring, and (`consume`) the cursor moved past it.
    Result<std::size_t> receive(std::span<std::byte> into, Deadline deadline, bool nonBlocking,
                                bool consume);
    // Whether the application may read our ring in place (recvView), and the ring then (asked
    // only while the connection is open); else every byte is copied.
    virtual bool hasViews() const noexcept { return false; }
    virtual std::span<const std::byte> ownRing() const noexcept { return {}; }
    // A CDC of ours is still on its way (SMC-R: posted, not completed): a send's bytes may
    // wait for it, up to corkLimit() of them, if autocorking is on; the transport pushes
    // them when it completes (CdcState::pushDue).
    virtual bool announcing() const SMC_REQUIRES(mutex_) { return false; }
    virtual std::size_t corkLimit() const noexcept
    {
        return std::numeric_limits<std::size_t>::max();
    }
    // A send must wait although the ring has room (SMC-R: a lost link until failover, a full
    // sndbuf until completions).
    virtual bool sendStalled() const SMC_REQUIRES(mutex_) { return false; }
    // close() must send a CDC even if its own close action sends none (SMC-R: one owed).
    virtual bool owesCdc() const SMC_REQUIRES(mutex_) { return false; }
    // close(), after its CDC: no transport event reaches us once this returns.
    virtual void detach() noexcept {}
    // close(), last: the buffers go back; no copy runs and none will.
    virtual void release() noexcept = 0;
    // fillInfo(): the transport's fields (no lock held; also after close()).
    virtual void describe(ConnectionInfo& info) const = 0;

    // --- For the transports.
    // A futex wait's timeout up to `until`, in `ts`: &ts, null for no deadline
    // (Deadline::max()); false when `until` has passed (no wait).
    static bool sleepLimit(Deadline until, timespec& ts, const timespec*& timeout) noexcept;
    // Whether a wait that said a signal handler cut it short (`cut`) fails its call with
    // interrupted, as SocketOptions::onSignal decides (`deadline`: the call's; max for none).
    bool interrupts(bool cut, Deadline deadline) const noexcept
    {
        return cut && onSignal_ != nullptr && onSignal_(deadline != Deadline::max());
    }
    // The next CDC from the stream (`pending`: bytes a blocked send still has) to stage().
    void announce(std::size_t pending = 0) SMC_REQUIRES(txMutex_, mutex_);
    // A CDC from the peer into the stream. False if it breaks the rules (the caller aborts).
    bool receive(const cdc::CdcMessage& m) SMC_REQUIRES(mutex_);
    // Marks the connection aborted and wakes our waiters; true if the peer must hear of it
    // (`tellPeer`: the abort flag then goes into every later CDC).
    bool abort(bool tellPeer) SMC_REQUIRES(mutex_);

    Mutex txMutex_; // CDCs leave in the order they were built (sequence numbers)
    mutable Mutex mutex_;
    CdcState cdc_ SMC_GUARDED_BY(mutex_);

private:
    // The start of a wait loop's look: not_connected once closed, else the wake-up mark taken
    // before what the peer left is taken in (so nothing after it is missed).
    Result<std::uint64_t> look() SMC_REQUIRES(mutex_);
    // Nothing to do yet: try-again when non-blocking, timed_out past the deadline, else a
    // wait for a wake-up past `mark`.
    Result<void> waitPast(MutexLocker& lock, std::uint64_t mark, Deadline deadline,
                          bool nonBlocking, bool forBytes) SMC_REQUIRES(mutex_);
    // send() up to the copy: how many bytes put() took (not produced yet).
    Result<std::size_t> copyOut(std::span<const std::byte> data, Deadline deadline,
                                bool nonBlocking) SMC_REQUIRES(sendMutex_);
    // Waits for bytes to read: how many, and where (0 at the orderly end, or at once when
    // `block` is false and there are none).
    Result<std::size_t> awaitReadable(Deadline deadline, bool nonBlocking, bool block,
                                      cdc::Cursor& at) SMC_REQUIRES(recvMutex_);
    // The receiver took n bytes: the consumer moves; the peer hears of it when the window
    // update rule says so.
    Result<void> consumed(std::size_t n) SMC_REQUIRES(recvMutex_);
    // What the close machine asked for: its flags into the stream, and a CDC; true if one.
    bool act(const cdc::CloseAction& action) SMC_REQUIRES(txMutex_, mutex_);
    // Readiness from a copy of the stream with what the peer sent since (peek()).
    template <typename Verdict> bool probe(Verdict verdict) const;
    // writable()'s verdict on `s`, the stream as a call would see it.
    bool canSend(const cdc::CdcStream& s) const SMC_REQUIRES(mutex_);

    // Senders in send(), running or waiting for sendMutex_: a send that sees others behind
    // it leaves the announcing to them (autocorking).
    std::atomic<unsigned> queued_{0};
    // Whether a wait that a signal handler cut short fails (null: it goes on waiting).
    const SignalPolicy onSignal_;
    Mutex closeMutex_; // one close() at a time, start to end
    Mutex sendMutex_;  // one sender at a time (put(): the copy out of the caller's bytes)
    Mutex recvMutex_;  // one receiver at a time (the copy out of ours)
    // write_blocked told since the peer last freed space in its ring: said once, else two
    // blocked ends would bounce the flag forever.
    bool blockedSent_ SMC_GUARDED_BY(mutex_) = false;
    std::size_t viewOut_ SMC_GUARDED_BY(mutex_) = 0; // recvView handed out, not released
};

} // namespace smc::net
