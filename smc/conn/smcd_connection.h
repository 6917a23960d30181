// SPDX-License-Identifier: MIT
// SmcdConnection: one SMC-D connection's data path, our DMB and the peer's, mapped here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "smc/conn/cdc_connection.h"
#include "smc/conn/setup.h"

namespace smc::net
{

// Each side writes into the other's DMB: bytes into its ring (from offset 32), then its
// CDC into the 32-byte head, then rings its doorbell. What the peer writes into our DMB is
// never trusted: cursors are checked (CdcStream) before any byte is read, and a peer that
// breaks the rules gets an abort, never a read outside our ring.
//
// The doorbell (bytes 24..31 of a DMB head, reserved in the CDC's SMC-D layout): a 32-bit
// sequence the writer bumps after each CDC, and a 32-bit word the owner sets while it
// sleeps on that sequence (a futex: the memory is shared) and while a receive waits, plus two
// bits for an application that polls its socket: one asks for signals at all, one for a
// signal when room is freed.
// The owner then offers the peer its ready socket (ShmIsm::offer), and the pulse word
// (bytes 4..7, reserved too) says which of the peer's CDCs need a pulse on it: how many bytes
// the owner's reader had read (mod 2^24) when it last found its ring empty, and the pulses
// promised since (8 bits; at kMaxPromised or more the peer rings the doorbell instead, which
// is how the owner switches pulses off). A CDC whose bytes end elsewhere gets a pulse (none
// while a receive waits: it takes them itself), the rest the DMB's ISM doorbell (close flags; room
// freed while asked), which our executor turns into readiness. A peer can only stall its own
// connection with these: every wait has the caller's deadline or a short patience, and the peer's
// death wakes us from our own side (the TCP socket).
class SmcdConnection final : public CdcConnection
{
public:
    // `busyPoll`: how long a blocked call watches the doorbell before it sleeps.
    // `autocorkBytes`: SocketOptions::autocorkBytes. `onSignal`: whether a blocked call that
    // a signal handler woke fails with interrupted (DataPath).
    // Errors: invalid_argument (a DMB too small for its CDC head). Does not block.
    static Result<std::unique_ptr<SmcdConnection>> create(ShmIsm& device, SmcdSetup setup,
                                                          std::chrono::microseconds busyPoll,
                                                          std::size_t autocorkBytes,
                                                          SignalPolicy onSignal);
    // Closes if still open: our DMB is revoked and goes back to the pool, the peer's mapping
    // is dropped.
    ~SmcdConnection() override;

    // DataPath. Never blocks but for the caller's deadline. enableEvents(): asks the peer to
    // signal, and returns our DMB's ISM doorbell. startPulses(): offers the peer `pulse`.
    void peerGone() noexcept override;
    int enableEvents(int pulse) noexcept override;
    void drainEvents() noexcept override;
    bool startPulses() noexcept override;
    std::optional<unsigned> settlePulses() noexcept override;
    bool pulsesPromised() const noexcept override;
    void stopPulses() noexcept override;
    void awaitRoom(bool on) noexcept override;

private:
    SmcdConnection(ShmIsm& device, SmcdSetup setup, cdc::CdcStream stream,
                   std::chrono::microseconds busyPoll, std::size_t autocorkBytes,
                   SignalPolicy onSignal);
    const OwnDmb& ownDmb() const noexcept { return setup_.rmb; }
    std::byte* ownHead() const noexcept { return ownDmb()->data(); }
    std::byte* peerHead() const noexcept { return setup_.peer.data(); }
    std::span<std::byte> peerRing() const noexcept;

    // CdcConnection: the peer's CDC is read from our head, ours written into its head; the
    // doorbell wakes and is waited on.
    void absorb() override SMC_REQUIRES(mutex_);
    bool peek(cdc::CdcStream& s) const override SMC_REQUIRES(mutex_);
    std::uint64_t waitMark() const override SMC_REQUIRES(mutex_);
    bool wait(MutexLocker& lock, std::uint64_t mark, Deadline until, bool forBytes) override
        SMC_REQUIRES(mutex_);
    void wake() override SMC_REQUIRES(mutex_);
    void stage(const cdc::CdcMessage& m) override SMC_REQUIRES(txMutex_, mutex_);
    void deliver() override SMC_REQUIRES(txMutex_);
    Result<void> put(std::size_t at, std::span<const std::byte> bytes, Deadline deadline,
                     bool nonBlocking) override;
    Result<void> take(std::size_t at, std::span<std::byte> into) override;
    bool hasViews() const noexcept override { return true; }
    std::span<const std::byte> ownRing() const noexcept override;
    void release() noexcept override;
    void describe(ConnectionInfo& info) const override;

    // What the CDCs staged since the last delivery changed for the peer.
    struct Changes {
        bool bytes = false; // the producer cursor moved
        bool flags = false; // the connection flags (close, abort)
        bool room = false;  // the consumer cursor moved
    };
    void ringPeer(Changes c) noexcept SMC_REQUIRES(txMutex_);
    bool pulse() noexcept SMC_REQUIRES(txMutex_);

    ShmIsm& device_;
    // What smcss shows of the DMBs, kept apart: close() lets go of them, smcss may still ask.
    const struct Shown {
        std::size_t rmbBytes;
        std::size_t peerRmbBytes;
        std::uint64_t dmbToken;
        std::uint64_t peerDmbToken;
    } shown_;
    SmcdSetup setup_; // our DMB and the peer's mapping, until close()
    const std::chrono::microseconds busyPoll_;
    bool eventsWanted_ SMC_GUARDED_BY(mutex_) = false;
    int pulseFd_ SMC_GUARDED_BY(mutex_) = -1;        // enableEvents' `pulse`, not ours
    std::atomic<bool> pulsing_{false};               // offered, and not stopped
    std::atomic<std::uint32_t> sleepers_{0};         // our threads asleep in wait(), for wake()
    bool roomWanted_ SMC_GUARDED_BY(mutex_) = false; // our kWantsRoom bit, as last set
    cdc::CdcMessage staged_ SMC_GUARDED_BY(txMutex_);
    std::uint64_t stagedBytes_ SMC_GUARDED_BY(txMutex_) = 0; // the bytes staged_ announces
    Changes changes_ SMC_GUARDED_BY(txMutex_);
};

} // namespace smc::net
