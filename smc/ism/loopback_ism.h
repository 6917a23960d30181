// SPDX-License-Identifier: MIT
// LoopbackIsm: the in-process SMC-D device (Linux loopback-ism): DMBs shared without a copy.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <random>
#include <vector>

#include "base/mutex.h"
#include "smc/ism/ism_device.h"

namespace smc
{

// One host-local ISM device. Peers on the same device exchange data by
// writing into each other's DMBs (moveData) or by mapping them (attachDmb).
//
// The data path (moveData, signal) takes no device-wide lock: the token names
// its slot (low bits) and a per-slot user count keeps the memory alive while
// it is written, so writers of different DMBs never share a cache line.
// Unregister never waits for those users: a signal handler is one of them,
// and it may unregister its own DMB (ism_device.h). The slot is marked dying
// instead, and whoever leaves it last frees it.
class LoopbackIsm final : public IsmDevice
{
public:
    static constexpr std::uint32_t kMaxDmbs = 5000; // Linux SMC_LO_MAX_DMBS
    static constexpr std::uint16_t kChid = 0xFFFF;  // reserved for loopback
    static constexpr unsigned kIndexBits = 13;      // 8192 >= kMaxDmbs

    // `onSignal` is fixed for the device's life, so the data path reads it
    // without synchronisation. It may be empty.
    explicit LoopbackIsm(IrqHandler onSignal = {});
    // Cuts the attachments' way back first (they may outlive the device);
    // no call on the device may be in progress.
    ~LoopbackIsm() override;

    IsmGid localGid() const noexcept override { return gid_; }
    std::uint16_t chid() const noexcept override { return kChid; }
    Result<void> queryRemoteGid(const IsmGid& peer) const noexcept override;

    Result<DmbInfo> registerDmb(std::shared_ptr<std::byte> memory, std::size_t size) override;
    Result<void> unregisterDmb(DmbToken token) override;
    bool supportsNoCopy() const noexcept override { return true; }
    Result<DmbAttachment> attachDmb(DmbToken token) override;
    void detachDmb(DmbToken token) noexcept override;

    Result<void> moveData(DmbToken token, std::size_t offset, std::span<const std::byte> data,
                          bool signal) noexcept override;
    Result<void> signal(DmbToken token) noexcept override;

    // Observability for tests and tools. dmbCount() includes unregistered
    // DMBs whose last writer has not left yet (their slot is not free).
    std::uint32_t dmbCount() const noexcept;
    std::uint32_t attachCount(DmbToken token) const noexcept;
    std::uint64_t signalCount(DmbToken token) const noexcept;

private:
    // Set in `users` by unregister when writers are inside: the last one out
    // frees the slot.
    static constexpr std::uint32_t kDying = 1u << 31;

    struct alignas(64) Slot {
        std::atomic<DmbToken> token{0};      // 0 = free (or dying)
        std::atomic<std::uint32_t> users{0}; // writers inside moveData | kDying
        std::atomic<std::uint64_t> signals{0};
        std::byte* data = nullptr;
        std::size_t size = 0;
        std::shared_ptr<std::byte> memory;
        std::uint32_t attached = 0; // under mutex_
        DmbToken lastToken = 0;     // never hand the same token out twice in a row
    };

    Slot* find(DmbToken token) noexcept;
    const Slot* find(DmbToken token) const noexcept;
    void raise(Slot& slot, std::uint32_t index, DmbToken token) noexcept;
    void leave(Slot& slot, std::uint32_t index) noexcept;
    std::shared_ptr<std::byte> freeIfIdle(Slot& slot, std::uint32_t index) SMC_REQUIRES(mutex_);

    IsmGid gid_;
    // The control path (register, unregister, attach, detach), and each
    // slot's `attached`, `memory`, `data`, `size` while it changes.
    mutable Mutex mutex_;
    std::mt19937_64 random_ SMC_GUARDED_BY(mutex_);
    std::vector<std::uint32_t> freeIndexes_ SMC_GUARDED_BY(mutex_);
    std::unique_ptr<Slot[]> slots_;
    const IrqHandler onSignal_;
    const std::shared_ptr<DmbDetacher> detacher_; // shared with every attachment
};

} // namespace smc
