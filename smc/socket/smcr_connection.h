// SPDX-License-Identifier: MIT
// SmcrConnection: one SMC-R connection's data path over a link group (RDMA WRITE + CDC).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>

#include "base/event_fd.h"
#include "base/mutex.h"
#include "base/unique_fd.h"
#include "smc/core/link_group.h"
#include "smc/socket/cdc_state.h"
#include "smc/socket/data_path.h"
#include "smc/socket/stack.h"
#include "smc/socket/tcp.h"

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
// receiver learns of new bytes only from CDCs, checked by CdcStream before any byte is read,
// so a peer that breaks the rules gets an abort, never a read outside our ring.
//
// Failover (§2.7): when the group moves the connection to another link, we send the
// validation CDC (sequence number: the first CDC that announced what the peer's cursors
// prove it processed, a lower bound of its newest; at most 32767 behind ours) and a full CDC with
// the current cursors on the new link; a write the old link did not finish is done again by send().
// The peer's validation is checked against the newest CDC we processed: it claims one we never saw
// -> out of sync -> abort.
//
// Threads: one sender and one receiver may run at once, plus the group's threads that
// deliver CDCs and failover moves. The connection holds its group: a group that ended (and
// that its manager let go of) lives until the connection is gone.
class SmcrConnection final : public DataPath
{
public:
    // After the CLC handshake completed (Handshake::complete set the peer's RMB): `conn` is
    // ours, `peerToken` the peer connection's alert token (from its CLC), `peerRmbBytes` its
    // RMB's size (the ring we write into). Takes over the connection: close() (or the
    // destructor) closes it in the group. Errors: invalid_argument (no connection, a size
    // CdcStream refuses), the group's (the connection is no longer open). Does not block,
    // beyond handing over a CDC the peer sent before we were ready.
    static Result<std::unique_ptr<SmcrConnection>>
    create(std::shared_ptr<LinkGroup> group, ConnectionPtr conn, std::uint32_t peerToken,
           std::size_t peerRmbBytes, std::size_t autocorkBytes = 0);
    // close(), then gives everything back.
    ~SmcrConnection() override;
    SmcrConnection(const SmcrConnection&) = delete;
    SmcrConnection& operator=(const SmcrConnection&) = delete;

    // As Socket::send/recv: the bytes taken (send; up to the peer's free ring space), the
    // bytes read (recv; 0 at end of stream). Errors: not_connected (closed), connection_reset
    // (aborted: by the peer, a protocol violation, the group's end), broken_pipe (send after
    // shutdownWrite, or the peer closed), resource_unavailable_try_again (nonBlocking and
    // nothing to do), timed_out (deadline), the group's write errors other than a lost link
    // (then the connection is aborted). Block until the deadline unless nonBlocking; send
    // also blocks for the RDMA WRITE, and across a failover.
    Result<std::size_t> send(std::span<const std::byte> data, Deadline deadline, bool nonBlocking,
                             bool hold) override;
    Result<std::size_t> recv(std::span<std::byte> into, Deadline deadline,
                             bool nonBlocking) override;
    // done_writing to the peer. Errors: not_connected (closed). Never blocks beyond one send.
    // No views (the group may take our RMB back when it ends): every byte is copied.
    Result<RecvView> recvView(std::span<std::byte> copy, std::size_t threshold, Deadline deadline,
                              bool nonBlocking) override;
    Result<void> releaseView() override;
    Result<void> flush() override;
    Result<void> shutdownWrite() override;
    // closed (or abort, when unread bytes are left) to the peer; the connection is closed in
    // the group (DELETE_RKEY) and its buffers go back to the pool. Waits for a running send
    // or recv to leave, for a running flush of an owed CDC (up to one send-slot wait) and for
    // the peer's DELETE_RKEY answer (up to the LLC timeouts).
    void close() noexcept override;
    // The TCP connection ended: if the peer did not close first, it died (abort). In a live
    // group its closing CDC may still be on the way over the link: that gets a grace period
    // (while CDCs keep coming) on the group's executor, then the abort. Never blocks.
    void peerGone() noexcept override;

    bool readable() const override; // recv would not block
    bool abandoned() const override;
    bool writable() const override; // send would not block
    void fillInfo(ConnectionInfo& info) const override;
    // An eventfd that becomes readable whenever readable() or writable() may have changed.
    // -1 if it cannot be made.
    int enableEvents() noexcept override;
    // Drains the eventfd (the epoll thread does it before re-checking readiness).
    void drainEvents() noexcept override;

    SmcrStats stats() const;
    std::uint32_t token() const noexcept { return conn_->token; }

private:
    using Wire = std::array<std::byte, cdc::kSmcrCdcSize>;
    static constexpr std::size_t kMaxUnconfirmed = 1024;

    SmcrConnection(std::shared_ptr<LinkGroup> group, ConnectionPtr conn, std::uint32_t peerToken,
                   cdc::CdcStream stream, std::size_t autocorkBytes);
    // send() without the corking: the RDMA WRITEs, their bytes unannounced.
    Result<std::size_t> sendHeld(std::span<const std::byte> data, Deadline deadline,
                                 bool nonBlocking) SMC_REQUIRES(sendMutex_);
    // A send is leaving: the CDC that announces what it left unannounced, unless `hold` or a
    // send queued behind it (`behind`) may send it.
    std::optional<Wire> settle(bool hold, bool behind, std::size_t pending) SMC_REQUIRES(mutex_);

    // The group's events (its threads).
    void onCdc(std::span<const std::byte> bytes);
    void onMoved();
    void onEnded();
    // The grace after peerGone() is over: abort unless the close came, wait on if CDCs do.
    void onPeerGoneGrace();
    void armPeerGoneGrace() SMC_REQUIRES(mutex_);
    void unhook(); // close(): no grace timer or flush runs or comes once this returns

    // The next CDC from the stream, remembered for the failover validation.
    Wire build(std::size_t pending = 0) SMC_REQUIRES(mutex_);
    // What the close machine asked for: its flags into the stream, and a CDC.
    std::optional<Wire> act(const cdc::CloseAction& action) SMC_REQUIRES(mutex_);
    // Abort: the close machine and (unless the peer cannot hear us) the flag into the
    // stream; true if a CDC must tell the peer.
    bool abort(bool tellPeer = true) SMC_REQUIRES(mutex_);
    // Sends the CDC onCdc found owed (a blocking task's; cdcOwed_).
    void flushOwed();
    // After a peer CDC: which of our CDCs the peer has surely processed (its cursors).
    void noteProcessed() SMC_REQUIRES(mutex_);
    // A CDC to the peer, again on the new link if failover moved us meanwhile; a lost link
    // is the moved handler's to make up for (it sends the current cursors); any other
    // failure aborts the connection.
    void transmit(const Wire& wire) SMC_REQUIRES(txMutex_);
    void wake() SMC_REQUIRES(mutex_);
    // Waits until `until` or a wake.
    void wait(MutexLocker& lock, Deadline until) SMC_REQUIRES(mutex_);
    std::size_t ringSize() const noexcept { return conn_->rmb.size(); }

    const std::shared_ptr<LinkGroup> group_; // first: goes last, after conn_
    const ConnectionPtr conn_;
    const std::uint32_t peerToken_;
    const std::size_t peerRingSize_;
    const std::size_t stageBytes_; // our sndbuf: what one write stages at most
    // Senders in send(), running or waiting for sendMutex_ (autocorking).
    std::atomic<unsigned> queued_{0};

    // Lock order: closeMutex_, then sendMutex_ / recvMutex_, then txMutex_, then mutex_.
    Mutex closeMutex_; // one close() at a time, start to end
    Mutex sendMutex_;  // one sender at a time (the RDMA WRITEs into the peer's ring)
    Mutex recvMutex_;  // one receiver at a time (the copy out of ours)
    Mutex txMutex_;    // CDCs leave in the order they were built (sequence numbers)
    mutable Mutex mutex_;
    ConditionVariable changed_;
    CdcState cdc_ SMC_GUARDED_BY(mutex_);
    bool ended_ SMC_GUARDED_BY(mutex_) = false; // the group ended the connection
    // write_blocked told since the peer last freed space in its ring
    bool blockedSent_ SMC_GUARDED_BY(mutex_) = false;
    std::uint64_t moves_ SMC_GUARDED_BY(mutex_) = 0;
    bool cdcOwed_ SMC_GUARDED_BY(mutex_) = false;     // a CDC onCdc found due, not built yet
    bool flushPosted_ SMC_GUARDED_BY(mutex_) = false; // flushOwed is queued
    // moves_ when a write failed on a lost link: not writable until failover moves us.
    std::optional<std::uint64_t> lostLinkAt_ SMC_GUARDED_BY(mutex_);
    std::uint64_t wakes_ SMC_GUARDED_BY(mutex_) = 0;
    // Receive side: the newest sequence number processed (Linux's rx seqno).
    std::uint16_t lastSeq_ SMC_GUARDED_BY(mutex_) = 0;
    // Send side: bytes ever produced; CDCs built (the sequence number without its wrap);
    // from the newest CDC known processed on, each CDC that changed what we announced
    // (number, producer and consumer in bytes ever produced / consumed); the newest CDC known
    // processed.
    std::uint64_t produced_ SMC_GUARDED_BY(mutex_) = 0;
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
    bool released_ = false; // close() gave the connection back (sendMutex_ and recvMutex_ held)
    // The grace timer and the flush task reach us through this; close() unhooks them
    // (waiting for a running one).
    struct Hook {
        Mutex mutex;
        SmcrConnection* self SMC_GUARDED_BY(mutex) = nullptr;
    };
    const std::shared_ptr<Hook> hook_ = std::make_shared<Hook>();
    std::optional<Executor::TimerId> graceTimer_ SMC_GUARDED_BY(mutex_);
    std::uint64_t graceCdcIn_ SMC_GUARDED_BY(mutex_) = 0; // CDCs in when it was armed
};

} // namespace smc::net
