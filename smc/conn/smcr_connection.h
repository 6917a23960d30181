// SPDX-License-Identifier: MIT
// SmcrConnection: one SMC-R connection's data path over a link group (RDMA WRITE + CDC).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <deque>
#include <memory>
#include <optional>
#include <span>

#include "base/event_fd.h"
#include "base/mutex.h"
#include "smc/conn/cdc_connection.h"
#include "smc/core/link_group.h"

namespace smc::net
{

// What a connection counted, for tests and smcss.
struct SmcrStats {
    std::uint64_t cdcIn = 0;       // CDCs the group handed us
    std::uint64_t cdcStale = 0;    // dropped: sequence number before the last one (§2.5)
    std::uint64_t cdcOut = 0;      // CDCs the link took
    std::uint64_t moves = 0;       // failovers that moved us to another link
    std::uint64_t validations = 0; // the peer's failover validations that matched
};

// Each side RDMA-writes into the other's RMB ring (from offset 0: SMC-R has no head), then
// sends a CDC (44 bytes on the link, LinkGroup::sendCdc) with its new producer cursor; the
// receiver learns of new bytes only from CDCs. Sent bytes wait in our sndbuf until a CDC
// announces them: corked sends leave in one RDMA WRITE. Nothing is waited for: the WRITEs and
// their CDC are posted, and the CDC's completion gives their room in the sndbuf back. While
// one is on its way, a lone sender's small sends wait in the sndbuf too (autocorking, as
// Linux's): that completion pushes them.
//
// Failover (§2.7): when the group moves the connection to another link, we send the
// validation CDC (sequence number: the first CDC that announced what the peer's cursors
// prove it processed, a lower bound of its newest; at most 32767 behind ours) and a full CDC with
// the current cursors on the new link, after the bytes no completion said landed (they are
// still in our sndbuf; first the old link's posts end, so that none of them lands late).
// The peer's validation is checked against the newest CDC we processed: it claims one we never saw
// -> out of sync -> abort.
//
// Threads: besides CdcConnection's, the group's threads that deliver CDCs and failover
// moves. The connection holds its group: a group that ended (and
// that its manager let go of) lives until the connection is gone.
class SmcrConnection final : public CdcConnection
{
public:
    // After the CLC handshake completed (Handshake::complete set the peer's RMB): `conn` is
    // ours, `peerToken` the peer connection's alert token (from its CLC), `peerRmbBytes` its
    // RMB's size (the ring we write into), `onSignal` whether a blocked send or receive that a
    // signal handler woke fails (SocketOptions). Takes over the connection: close() (or the
    // destructor) closes it in the group. Errors: invalid_argument (no connection, a size
    // CdcStream refuses), the group's (the connection is no longer open). Does not block,
    // beyond handing over a CDC the peer sent before we were ready.
    static Result<std::unique_ptr<SmcrConnection>>
    create(std::shared_ptr<LinkGroup> group, ConnectionPtr conn, std::uint32_t peerToken,
           std::size_t peerRmbBytes, std::size_t autocorkBytes = 0,
           SignalPolicy onSignal = nullptr);
    // close(), then gives everything back.
    ~SmcrConnection() override;

    // DataPath, with these SMC-R specifics. send() copies into our sndbuf; the RDMA WRITEs go
    // with the CDC that announces the bytes, posted, not waited for (a send blocks only for a
    // send slot). A send that finds the sndbuf full waits for completions, or writes what is
    // not written yet and waits for that (then, across a failover, until the new link took
    // them). Besides its own errors, the group's write errors other than a lost link abort
    // the connection. Any CDC (a receive's window update too) first writes the bytes it
    // announces. recvView() copies every byte (the group may take our RMB back when it ends).
    // close() waits for a running flush of an owed CDC (up to one send-slot wait), for the
    // completion of what it announces (unless the TCP connection ended first: peerGone()) and
    // of every WRITE out (up to 10 s each), when the link went with sent bytes not landed up
    // to 10 s for failover to carry them, and for the peer's DELETE_RKEY answer (up to the LLC
    // timeouts). peerGone(): in a live group the peer's closing CDC may still be on its way
    // over the link; it gets a grace period (while CDCs keep coming) on the group's executor,
    // then the abort. Never blocks.
    // enableEvents(): an eventfd, -1 if it cannot be made.
    void peerGone() noexcept override;
    int enableEvents(int pulse) noexcept override;
    void drainEvents() noexcept override;

    SmcrStats stats() const;
    std::uint32_t token() const noexcept { return conn_->token; }

private:
    using Wire = std::array<std::byte, cdc::kSmcrCdcSize>;
    static constexpr std::size_t kMaxUnconfirmed = 1024;

    SmcrConnection(std::shared_ptr<LinkGroup> group, ConnectionPtr conn, std::uint32_t peerToken,
                   cdc::CdcStream stream, std::size_t autocorkBytes, SignalPolicy onSignal);

    // CdcConnection: RDMA WRITEs, CDCs over the group's link, futexes (which a signal handler
    // interrupts, as it does a socket's wait in the kernel). The mark holds both words.
    std::uint64_t waitMark() const override SMC_REQUIRES(mutex_)
    {
        return std::uint64_t{room_.word.load(std::memory_order_relaxed)} << 32 |
               changed_.word.load(std::memory_order_relaxed);
    }
    bool wait(MutexLocker& lock, std::uint64_t mark, Deadline until, bool forBytes) override
        SMC_REQUIRES(mutex_);
    void wake() override SMC_REQUIRES(mutex_);
    void stage(const cdc::CdcMessage& m) override SMC_REQUIRES(txMutex_, mutex_);
    void deliver() override SMC_REQUIRES(txMutex_);
    Result<void> put(std::size_t at, std::span<const std::byte> bytes, Deadline deadline,
                     bool nonBlocking) override;
    std::size_t putLimit() const noexcept override;
    bool announcing() const override SMC_REQUIRES(mutex_) { return corking_ > 0; }
    std::size_t corkLimit() const noexcept override
    {
        return std::min(stageBytes_, peerRingSize_) / 2;
    }
    Result<void> take(std::size_t at, std::span<std::byte> into) override;
    bool sendStalled() const override SMC_REQUIRES(mutex_);
    bool owesCdc() const override SMC_REQUIRES(mutex_) { return cdcOwed_; }
    void detach() noexcept override;
    void release() noexcept override;
    void describe(ConnectionInfo& info) const override;

    // The group's events (its threads).
    void onCdc(std::span<const std::byte> bytes);
    void onMoved();
    // The completion of a CDC that announced bytes up to `upTo` (`bytes`: and wrote some;
    // a link's thread; never blocks): `ok`, they landed and their room in the sndbuf is
    // free again.
    void onLanded(bool ok, std::uint64_t upTo, bool bytes);
    // landed_, written_ or a post's fate changed: wakes senders, close and the resend.
    void roomChanged() SMC_REQUIRES(mutex_);
    // After a move: once the old link's posts ended, what no completion said landed, the
    // validation, a full CDC. `closing`: close() found the link lost; nothing runs after it,
    // so it waits here (up to 10 s) for the move, and again if the new link goes too.
    void resendAfterMove(bool closing) SMC_REQUIRES(txMutex_);
    void onEnded();
    // The grace after peerGone() is over: abort unless the close came, wait on if CDCs do.
    void onPeerGoneGrace();
    void armPeerGoneGrace() SMC_REQUIRES(mutex_);

    // RDMA-WRITEs our sndbuf's bytes up to `upTo` (bytes ever sent) that are not written yet.
    // False if they could not all go: a lost link (lostLinkAt_ set: resendAfterMove writes them on
    // the next one), or the connection aborted.
    bool writeOut(std::uint64_t upTo) SMC_REQUIRES(txMutex_);
    // The pieces (split where our sndbuf and the peer's ring wrap) from what is written to
    // `upTo`; their count (0 also if they would not fit: then none is written).
    using Pieces = std::array<LinkGroup::SndbufPiece, LinkGroup::kMaxSndbufPieces>;
    std::size_t piecesTo(std::uint64_t upTo, Pieces& pieces) const SMC_REQUIRES(txMutex_);
    // How a CDC goes: posted right behind the WRITEs of what it announces that was not
    // written yet (if any), none waited for (onLanded hears of it). False if anything failed:
    // then nothing is known to have gone, and the caller writes and sends again the slow way,
    // which finds out why; no send slot in time aborts the connection instead (true).
    bool writeThenTransmit(std::uint64_t upTo, const Wire& wire) SMC_REQUIRES(txMutex_);
    // Waits (up to `until`) for every CDC out to complete; false if one is still out.
    bool awaitLanded(MutexLocker& lock, Deadline until) SMC_REQUIRES(mutex_);
    // close(): whether everything up to `upTo` and every CDC since `lostCdcs` landed (waits
    // up to `until`); if not, a lost link (unless a move came since `moves`).
    bool allLanded(std::uint64_t moves, std::uint64_t lostCdcs, std::uint64_t upTo, Deadline until);
    // A move whose resend has not run yet: nothing may be posted before it went back to
    // what surely landed.
    bool moveUnresolved() const SMC_REQUIRES(mutex_) { return rewoundAt_ != moves_; }
    // Sends what is due on a blocking task (flushPosted_): the CDC onCdc found owed
    // (cdcOwed_), or the bytes autocorking held once the last CDC out completed.
    void flushOwed();
    bool pushDue() const SMC_REQUIRES(mutex_);
    void postFlush() SMC_REQUIRES(mutex_);
    // After a peer CDC: which of our CDCs the peer has surely processed (its cursors).
    void noteProcessed() SMC_REQUIRES(mutex_);
    // A CDC to the peer on our link, not tracked (the slow way, and the resend's
    // validation). False if a lost link dropped it (lostLinkAt_ set: the resend after the
    // move sends the current cursors); any other failure aborts the connection.
    bool transmit(const Wire& wire) SMC_REQUIRES(txMutex_);
    std::size_t ringSize() const noexcept { return conn_->rmb.size(); }

    const std::shared_ptr<LinkGroup> group_; // first: goes last, after conn_
    const ConnectionPtr conn_;
    const std::uint32_t peerToken_;
    const std::size_t peerRingSize_;
    const std::size_t stageBytes_; // our sndbuf: bytes sent, not yet written, at most

    // Bytes ever copied into the sndbuf (put(); the one sender's, under CdcConnection's
    // send lock), ever posted for RDMA WRITE (advanced, and after a move taken back to
    // landed_, under txMutex_) and known to be in the peer's ring (a completion said so;
    // any thread). The sndbuf holds copied_ - landed_ of them.
    std::uint64_t copied_ = 0;
    std::atomic<std::uint64_t> written_{0};
    std::atomic<std::uint64_t> landed_{0};
    std::uint64_t stagedUpTo_ SMC_GUARDED_BY(txMutex_) = 0; // the bytes sent when last staged
    unsigned inFlight_ SMC_GUARDED_BY(mutex_) = 0;          // CDCs posted, completion not told
    unsigned corking_ SMC_GUARDED_BY(mutex_) = 0;           // of them, those that wrote bytes
    std::uint64_t lostCdcs_ SMC_GUARDED_BY(mutex_) = 0;     // completions that said "not landed"
    bool tcpEnded_ SMC_GUARDED_BY(mutex_) = false;          // peerGone() was told
    std::uint64_t rewoundAt_ SMC_GUARDED_BY(mutex_) = 0;    // moves_ when written_ last went back
    LinkGroup::LinkRef via_ SMC_GUARDED_BY(txMutex_);       // the link we post on

    // Staged, not yet delivered: at most a failover's validation and the CDC after it.
    std::array<Wire, 2> outbox_ SMC_GUARDED_BY(txMutex_){};
    std::size_t staged_ SMC_GUARDED_BY(txMutex_) = 0;
    std::uint64_t moves_ SMC_GUARDED_BY(mutex_) = 0;
    bool cdcOwed_ SMC_GUARDED_BY(mutex_) = false;      // a CDC onCdc found due, not built yet
    bool flushPosted_ SMC_GUARDED_BY(mutex_) = false;  // flushOwed is queued
    bool resendPosted_ SMC_GUARDED_BY(mutex_) = false; // resendAfterMove is queued
    // moves_ when a write failed on a lost link: not writable until failover moves us.
    std::optional<std::uint64_t> lostLinkAt_ SMC_GUARDED_BY(mutex_);
    // A futex word, bumped under mutex_, and who sleeps on it (with mutex_ let go): a bump
    // with nobody asleep makes no system call.
    struct Waiters {
        std::atomic<std::uint32_t> word{0};
        std::atomic<std::uint32_t> sleepers{0};
        void wakeAll() noexcept;
        // Sleeps while the word is `seen`, up to `timeout` (null: none); whether a signal
        // handler cut it short.
        bool sleep(std::uint32_t seen, const timespec* timeout) noexcept;
    };
    Waiters changed_; // receivers: every wake()
    Waiters room_;    // senders, close and the resend: every wake(), and room (roomChanged)
    // Receive side: the newest sequence number processed (Linux's rx seqno).
    std::uint16_t lastSeq_ SMC_GUARDED_BY(mutex_) = 0;
    // Send side: CDCs built (the sequence number without its wrap); from the newest CDC
    // known processed on, each CDC that changed what we announced (number, producer and
    // consumer in bytes ever produced / consumed); the newest CDC known processed.
    std::uint64_t built_ SMC_GUARDED_BY(mutex_) = 0;
    struct Sent {
        std::uint64_t number;
        std::uint64_t producer;
        std::uint64_t consumer;
    };
    std::deque<Sent> unconfirmed_ SMC_GUARDED_BY(mutex_);
    std::uint64_t confirmed_ SMC_GUARDED_BY(mutex_) = 0;
    EventFd events_ SMC_GUARDED_BY(mutex_);
    SmcrStats stats_ SMC_GUARDED_BY(mutex_);
    bool released_ = false; // the connection went back to the group (close(), or create failed)
    // The grace timer and the flush and resend tasks reach us through this; close() unhooks them
    // (waiting for a running one).
    struct Hook {
        Mutex mutex;
        SmcrConnection* self SMC_GUARDED_BY(mutex) = nullptr;
    };
    const std::shared_ptr<Hook> hook_ = std::make_shared<Hook>();
    // Completions reach us through this one: held only briefly, never across a post, so a
    // link's thread never waits for a sender that waits for that thread.
    const std::shared_ptr<Hook> landedHook_ = std::make_shared<Hook>();
    std::optional<Executor::TimerId> graceTimer_ SMC_GUARDED_BY(mutex_);
    std::uint64_t graceCdcIn_ SMC_GUARDED_BY(mutex_) = 0; // CDCs in when it was armed
};

} // namespace smc::net
