// SPDX-License-Identifier: MIT
// SmcdConnection: one SMC-D connection's data path, our DMB and the peer's, mapped here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>

#include "base/mutex.h"
#include "smc/socket/cdc_state.h"
#include "smc/socket/data_path.h"
#include "smc/socket/setup.h"
#include "smc/socket/tcp.h"

namespace smc::net
{

// Each side writes into the other's DMB: bytes into its ring (from offset 32), then its
// CDC into the 32-byte head, then rings its doorbell. What the peer writes into our DMB is
// never trusted: cursors are checked (CdcStream) before any byte is read, and a peer that
// breaks the rules gets an abort, never a read outside our ring.
//
// The doorbell (bytes 24..31 of a DMB head, reserved in the CDC's SMC-D layout): a 32-bit
// sequence the writer bumps after each CDC, and a 32-bit word the owner sets while it
// sleeps on that sequence (a futex: the memory is shared), plus a bit that asks for the
// DMB's ISM doorbell too (an application polling fd()). A peer can only stall its own
// connection with these: every wait has the caller's deadline, and the peer's death wakes
// us from our own side (the TCP socket).
//
// One sender and one receiver may run at once; the state they share is under mutex_.
class SmcdConnection final : public DataPath
{
public:
    // `busyPoll`: how long a blocked call watches the doorbell before it sleeps.
    // Errors: invalid_argument (a DMB too small for its CDC head). Does not block.
    // `autocorkBytes`: SocketOptions::autocorkBytes.
    static Result<std::unique_ptr<SmcdConnection>> create(SmcStack& stack, SmcdSetup setup,
                                                          std::chrono::microseconds busyPoll,
                                                          std::size_t autocorkBytes);
    // Aborts if still open, then gives everything back.
    ~SmcdConnection() override;
    SmcdConnection(const SmcdConnection&) = delete;
    SmcdConnection& operator=(const SmcdConnection&) = delete;

    // DataPath. close(): our DMB is revoked and goes back to the pool, the peer's mapping is
    // dropped. enableEvents(): asks the peer to signal our DMB's ISM doorbell too, and returns it.
    Result<std::size_t> send(std::span<const std::byte> data, Deadline deadline, bool nonBlocking,
                             bool hold) override;
    Result<std::size_t> recv(std::span<std::byte> into, Deadline deadline,
                             bool nonBlocking) override;
    Result<RecvView> recvView(std::span<std::byte> copy, std::size_t threshold, Deadline deadline,
                              bool nonBlocking) override;
    Result<void> releaseView() override;
    Result<void> flush() override;
    Result<void> shutdownWrite() override;
    void close() noexcept override;
    void peerGone() noexcept override;
    bool readable() const override;
    bool abandoned() const override;
    bool writable() const override;
    void fillInfo(ConnectionInfo& info) const override;
    int enableEvents() noexcept override;
    void drainEvents() noexcept override;

private:
    SmcdConnection(SmcStack& stack, SmcdSetup setup, cdc::CdcStream stream,
                   std::chrono::microseconds busyPoll, std::size_t autocorkBytes);
    std::byte* ownHead() const noexcept { return rmb_->data(); }
    std::byte* peerHead() const noexcept { return peer_.peer.data(); }
    std::span<std::byte> ownRing() const noexcept;
    std::span<std::byte> peerRing() const noexcept;

    // The peer's latest CDC (in our head) into the stream; a violation aborts.
    void absorb() SMC_REQUIRES(mutex_);
    // Our CDC into the peer's head (what the stream holds now): every byte produced is
    // announced.
    void publish(std::size_t pending = 0) SMC_REQUIRES(mutex_);
    // send() without the corking: the bytes into the peer's ring, unannounced.
    Result<std::size_t> sendHeld(std::span<const std::byte> data, Deadline deadline,
                                 bool nonBlocking) SMC_REQUIRES(sendMutex_);
    // Waits for bytes to read (recv's loop): how many, and where; 0 at the orderly end.
    Result<std::size_t> awaitReadable(Deadline deadline, bool nonBlocking, cdc::Cursor& at)
        SMC_REQUIRES(recvMutex_);
    // After the receiver took n bytes: the consumer cursor moves, the peer hears of it when
    // the window update rule says so. True if the peer must be rung.
    bool consumed(std::size_t n) SMC_REQUIRES(mutex_);
    // A send is leaving: announce what it left unannounced, unless `hold` or a send queued
    // behind it (`behind`) may. True if the peer must be rung.
    bool settle(bool hold, bool behind, std::size_t pending) SMC_REQUIRES(mutex_);
    // What the close machine asked for: its flags into the stream, and a CDC.
    void act(const cdc::CloseAction& action) SMC_REQUIRES(mutex_);
    bool peerClosed() const SMC_REQUIRES(mutex_);
    void abort() SMC_REQUIRES(mutex_);
    std::uint32_t doorbellSeen() const noexcept;
    void ringPeer() noexcept;
    void wakeOwn() noexcept;
    Result<void> wait(std::uint32_t seen, Deadline deadline) noexcept;
    void release() noexcept;

    SmcStack& stack_;
    BufferRef rmb_;
    SmcdSetup peer_;
    const std::chrono::microseconds busyPoll_;
    // Senders in send(), running or waiting for sendMutex_: a send that sees others behind
    // it leaves the announcing to them (autocorking).
    std::atomic<unsigned> queued_{0};

    Mutex sendMutex_; // one sender at a time (the copy into the peer's ring)
    Mutex recvMutex_; // one receiver at a time (the copy out of ours)
    mutable Mutex mutex_;
    CdcState cdc_ SMC_GUARDED_BY(mutex_);
    bool eventsWanted_ SMC_GUARDED_BY(mutex_) = false;
    std::size_t viewOut_ SMC_GUARDED_BY(mutex_) = 0; // recvView handed out, not released
};

} // namespace smc::net
