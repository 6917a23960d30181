// SPDX-License-Identifier: MIT
// RemoteDmb: a peer process's DMB mapped into ours, with the button of its doorbell.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "base/unique_fd.h"
#include "smc/ism/ism_device.h"

namespace smc
{

// A peer process's DMB mapped into ours without a copy (attachRemote).
// Move-only; unmaps and closes on destruction. Stays valid if the owner
// dies or revokes: the mapping keeps the pages it maps alive (after a
// revoke they are dead pages the owner no longer reads).
class RemoteDmb
{
public:
    RemoteDmb() = default;
    RemoteDmb(RemoteDmb&& other) noexcept { *this = std::move(other); }
    RemoteDmb& operator=(RemoteDmb&& other) noexcept;
    RemoteDmb(const RemoteDmb&) = delete;
    RemoteDmb& operator=(const RemoteDmb&) = delete;
    ~RemoteDmb() { reset(); }

    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    DmbToken token() const noexcept { return token_; }
    explicit operator bool() const noexcept { return data_ != nullptr; }

    // Raises the owner's interrupt: rings its doorbell. Never blocks, whatever
    // the owner did to it; a full queue or a dead owner is ignored.
    void signal() noexcept;
    // Pulses: whether the owner offered a descriptor for them (doorbell::offer,
    // taken at the first call, which comes once the pulse word is on), and one
    // byte sent into it; false if that failed (the offer is then dropped).
    // Never block. Not thread-safe: the connection's sender calls them, under
    // its txMutex_, and forgetOffer when the connection is over.
    bool canPulse() noexcept;
    bool pulse() noexcept;
    // The owner's offer belongs to one connection: the next one looks again.
    void forgetOffer() noexcept;
    // Unmaps and closes now.
    void reset() noexcept;

private:
    friend class ShmIsm;
    RemoteDmb(std::byte* data, std::size_t size, DmbToken token, UniqueFd button,
              std::shared_ptr<std::atomic<std::uint64_t>> live) noexcept
        : data_(data), size_(size), token_(token), button_(std::move(button)),
          live_(std::move(live))
    {
        live_->fetch_add(1, std::memory_order_relaxed);
    }

    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    DmbToken token_ = 0;
    UniqueFd button_;                                  // the owner's doorbell (doorbell.h)
    UniqueFd direct_;                                  // what the owner offered, if it did
    bool looked_ = false;                              // for an offer, once per connection
    std::shared_ptr<std::atomic<std::uint64_t>> live_; // the device's count of these
};

} // namespace smc
