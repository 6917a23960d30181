// SPDX-License-Identifier: MIT
// BufferPoolCore: link add/remove with bulk registration, per-buffer registration, grace periods.
#include "pool/internal/pool_core.h"

#include <thread>

namespace smc
{

using RegState = DescAccess::RegState;

void BufferPoolCore::synchronize() noexcept
{
    const std::uint64_t epoch = epoch_.fetch_add(1, std::memory_order_seq_cst) + 1;
    for (ThreadState* t = registry_.load(std::memory_order_acquire); t != nullptr; t = t->next) {
        for (;;) {
            const std::uint64_t seen = t->readEpoch.load(std::memory_order_seq_cst);
            if (seen == 0 || seen >= epoch)
                break;
            std::this_thread::yield();
        }
    }
}

std::error_code BufferPoolCore::registerOn(BufferDesc& d, unsigned link, bool wait) noexcept
{
    auto& state = DescAccess::regState(d, link);
    for (;;) {
        RegState s = state.load(std::memory_order_acquire);
        if (s == RegState::Registered)
            return {};
        if (s == RegState::Busy) {
            if (!wait)
                return {}; // a link change is registering it and will finish
            std::this_thread::yield();
            continue;
        }
        if (!state.compare_exchange_weak(s, RegState::Busy, std::memory_order_acquire))
            continue;
        std::error_code ec = registrar_.registerBuffer(d, link);
        state.store(ec ? RegState::Unregistered : RegState::Registered, std::memory_order_release);
        return ec;
    }
}

void BufferPoolCore::unregisterOn(BufferDesc& d, unsigned link) noexcept
{
    auto& state = DescAccess::regState(d, link);
    for (;;) {
        RegState s = state.load(std::memory_order_acquire);
        if (s == RegState::Unregistered)
            return;
        if (s == RegState::Busy) {
            std::this_thread::yield();
            continue;
        }
        if (!state.compare_exchange_weak(s, RegState::Busy, std::memory_order_acquire))
            continue;
        registrar_.unregisterBuffer(d, link);
        state.store(RegState::Unregistered, std::memory_order_release);
        return;
    }
}

// Register a reused buffer on the usable links it misses (see acquire).
std::error_code BufferPoolCore::registerOnUsable(ThreadState& t, BufferDesc& d) noexcept
{
    enterRead(t);
    const unsigned now = usable_.load(std::memory_order_seq_cst);
    std::error_code ec;
    for (unsigned link = 0; link < kMaxLinks && !ec; ++link)
        if (now & linkBit(link))
            ec = registerOn(d, link, true);
    exitRead(t);
    return ec;
}

void BufferPoolCore::unregisterAll(unsigned link) noexcept
{
    table_.forEach([&](BufferDesc& d) { unregisterOn(d, link); });
}

Result<void> BufferPoolCore::addLink(unsigned link)
{
    if (config_.tech == Tech::SmcD)
        return PoolErrc::NotSupported;
    if (link >= kMaxLinks)
        return PoolErrc::InvalidLink;
    MutexLocker lock(linkMutex_);
    if ((usable_.load() | adding_.load()) & linkBit(link))
        return PoolErrc::LinkExists;
    std::vector<BufferDesc*> claimed;
    claimed.reserve(config_.maxDescriptors); // no allocation once slots are Busy

    // From here on new buffers register on the link themselves; after
    // synchronize() no buffer is being registered under the old mask.
    adding_.fetch_or(linkBit(link), std::memory_order_seq_cst);
    synchronize();

    policy_->lockForLinkChange();
    table_.forEach([&](BufferDesc& d) {
        auto& state = DescAccess::regState(d, link);
        RegState expected = RegState::Unregistered;
        if (!state.compare_exchange_strong(expected, RegState::Busy, std::memory_order_seq_cst))
            return; // registered already, or its creator is at it
        if (!DescAccess::live(d).load(std::memory_order_seq_cst)) {
            state.store(RegState::Unregistered, std::memory_order_release);
            return;
        }
        claimed.push_back(&d);
    });
    std::error_code ec = registrar_.registerBuffers(claimed, link);
    for (BufferDesc* d : claimed)
        DescAccess::regState(*d, link).store(ec ? RegState::Unregistered : RegState::Registered,
                                             std::memory_order_release);
    // Buffers created meanwhile whose claim we skipped, or that a failed
    // creator left: make sure every live buffer ends up registered.
    table_.forEach([&](BufferDesc& d) {
        if (ec || !DescAccess::live(d).load(std::memory_order_acquire))
            return;
        ec = registerOn(d, link, true);
    });
    policy_->unlockForLinkChange();

    if (ec) {
        adding_.fetch_and(~linkBit(link), std::memory_order_seq_cst);
        synchronize();
        unregisterAll(link);
        return ec;
    }
    usable_.fetch_or(linkBit(link), std::memory_order_seq_cst);
    adding_.fetch_and(~linkBit(link), std::memory_order_seq_cst);
    return {};
}

Result<void> BufferPoolCore::removeLink(unsigned link)
{
    if (config_.tech == Tech::SmcD)
        return PoolErrc::NotSupported;
    if (link >= kMaxLinks)
        return PoolErrc::InvalidLink;
    MutexLocker lock(linkMutex_);
    if (!(usable_.load() & linkBit(link)))
        return PoolErrc::NoSuchLink;
    usable_.fetch_and(~linkBit(link), std::memory_order_seq_cst);
    synchronize();
    policy_->lockForLinkChange();
    unregisterAll(link);
    policy_->unlockForLinkChange();
    return {};
}

} // namespace smc
