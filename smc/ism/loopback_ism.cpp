// SPDX-License-Identifier: MIT
// The loopback-ism device: DMB table, tokens, no-copy attach, move_data and signals.
#include "smc/ism/loopback_ism.h"

#include <cstring>

namespace smc
{

LoopbackIsm::LoopbackIsm(IrqHandler onSignal)
    : random_(std::random_device{}()), slots_(std::make_unique<Slot[]>(1u << kIndexBits)),
      onSignal_(std::move(onSignal)), detacher_(std::make_shared<DmbDetacher>(*this))
{
    // Like Linux, a random GID: peers on this device must present the same one.
    gid_ = {random_(), random_()};
    freeIndexes_.reserve(kMaxDmbs);
    for (std::uint32_t i = kMaxDmbs; i-- > 0;)
        freeIndexes_.push_back(i); // hand out low indexes first
}

LoopbackIsm::~LoopbackIsm()
{
    detacher_->cut();
}

Result<void> LoopbackIsm::queryRemoteGid(const IsmGid& peer) const noexcept
{
    // A loopback device reaches only itself.
    if (peer == gid_)
        return {};
    return std::make_error_code(std::errc::host_unreachable);
}

LoopbackIsm::Slot* LoopbackIsm::find(DmbToken token) noexcept
{
    const std::uint32_t index = static_cast<std::uint32_t>(token & ((1u << kIndexBits) - 1));
    if (token == 0 || index >= kMaxDmbs)
        return nullptr;
    return &slots_[index];
}

const LoopbackIsm::Slot* LoopbackIsm::find(DmbToken token) const noexcept
{
    return const_cast<LoopbackIsm*>(this)->find(token);
}

Result<DmbInfo> LoopbackIsm::registerDmb(std::shared_ptr<std::byte> memory, std::size_t size)
{
    if (!memory || size == 0)
        return std::make_error_code(std::errc::invalid_argument);
    MutexLocker lock(mutex_);
    if (freeIndexes_.empty())
        return IsmErrc::DmbLimitReached;
    const std::uint32_t index = freeIndexes_.back();
    freeIndexes_.pop_back();
    Slot& slot = slots_[index];

    // Token = random high bits | slot index: unique on the device, never 0,
    // and never the token this slot had last, so a stale token is refused.
    DmbToken token;
    do {
        token = (random_() << kIndexBits) | index;
    } while ((token >> kIndexBits) == 0 || token == slot.lastToken);

    slot.data = memory.get();
    slot.size = size;
    slot.memory = std::move(memory);
    slot.attached = 0;
    slot.signals.store(0, std::memory_order_relaxed);
    slot.lastToken = token;
    slot.token.store(token, std::memory_order_seq_cst); // publish last
    return DmbInfo{token, index, slot.data, size};
}

Result<void> LoopbackIsm::unregisterDmb(DmbToken token)
{
    std::shared_ptr<std::byte> memory; // dropped after the lock, unless a peer still holds it
    MutexLocker lock(mutex_);
    Slot* slot = find(token);
    if (slot == nullptr || slot->token.load(std::memory_order_relaxed) != token)
        return IsmErrc::UnknownToken;
    // Refuse new writers. Writers inside stay (the caller may be one of
    // them, in a signal handler): waiting for them here would hang that
    // caller and stall the device. The last one out frees the slot.
    slot->token.store(0, std::memory_order_seq_cst);
    slot->users.fetch_or(kDying, std::memory_order_seq_cst);
    memory = freeIfIdle(*slot, static_cast<std::uint32_t>(token & ((1u << kIndexBits) - 1)));
    return {};
}

// The slot of an unregistered DMB, if nobody is inside it any more: exactly
// one caller wins the move from "dying, no users" to "free".
std::shared_ptr<std::byte> LoopbackIsm::freeIfIdle(Slot& slot, std::uint32_t index)
{
    std::uint32_t idle = kDying;
    if (!slot.users.compare_exchange_strong(idle, 0, std::memory_order_acq_rel,
                                            std::memory_order_relaxed))
        return nullptr;
    std::shared_ptr<std::byte> memory = std::move(slot.memory);
    slot.data = nullptr;
    slot.size = 0;
    freeIndexes_.push_back(index);
    return memory;
}

void LoopbackIsm::leave(Slot& slot, std::uint32_t index) noexcept
{
    if (slot.users.fetch_sub(1, std::memory_order_release) != (kDying | 1)) [[likely]]
        return;
    std::shared_ptr<std::byte> memory; // dropped after the lock
    MutexLocker lock(mutex_);
    memory = freeIfIdle(slot, index);
}

Result<DmbAttachment> LoopbackIsm::attachDmb(DmbToken token)
{
    MutexLocker lock(mutex_);
    Slot* slot = find(token);
    if (slot == nullptr || slot->token.load(std::memory_order_relaxed) != token)
        return IsmErrc::UnknownToken;
    ++slot->attached;
    return DmbAttachment(detacher_, token, slot->memory, slot->size);
}

void LoopbackIsm::detachDmb(DmbToken token) noexcept
{
    MutexLocker lock(mutex_);
    Slot* slot = find(token);
    // The owner may have unregistered meanwhile; then there is nothing to count.
    if (slot != nullptr && slot->token.load(std::memory_order_relaxed) == token &&
        slot->attached > 0)
        --slot->attached;
}

void LoopbackIsm::raise(Slot& slot, std::uint32_t index, DmbToken token) noexcept
{
    slot.signals.fetch_add(1, std::memory_order_relaxed);
    if (onSignal_)
        onSignal_(index, token);
}

Result<void> LoopbackIsm::moveData(DmbToken token, std::size_t offset,
                                   std::span<const std::byte> data, bool signal) noexcept
{
    Slot* slot = find(token);
    if (slot == nullptr || slot->token.load(std::memory_order_relaxed) != token)
        return IsmErrc::UnknownToken; // cheap refusal that does not hold up the slot's reuse
    const auto index = static_cast<std::uint32_t>(token & ((1u << kIndexBits) - 1));
    // Announce ourselves before checking the token; unregister does the
    // opposite, so one of the two always sees the other.
    slot->users.fetch_add(1, std::memory_order_seq_cst);
    Result<void> result;
    if (slot->token.load(std::memory_order_seq_cst) != token) {
        result = IsmErrc::UnknownToken;
    } else if (offset > slot->size || data.size() > slot->size - offset) {
        result = IsmErrc::OutOfBounds;
    } else {
        if (!data.empty())
            std::memcpy(slot->data + offset, data.data(), data.size());
        if (signal)
            raise(*slot, index, token); // may unregister this very DMB
    }
    leave(*slot, index);
    return result;
}

Result<void> LoopbackIsm::signal(DmbToken token) noexcept
{
    return moveData(token, 0, {}, true);
}

std::uint32_t LoopbackIsm::dmbCount() const noexcept
{
    MutexLocker lock(mutex_);
    return kMaxDmbs - static_cast<std::uint32_t>(freeIndexes_.size());
}

std::uint32_t LoopbackIsm::attachCount(DmbToken token) const noexcept
{
    MutexLocker lock(mutex_);
    const Slot* slot = find(token);
    return slot != nullptr && slot->token.load(std::memory_order_relaxed) == token ? slot->attached
                                                                                   : 0;
}

std::uint64_t LoopbackIsm::signalCount(DmbToken token) const noexcept
{
    const Slot* slot = find(token);
    return slot != nullptr && slot->token.load(std::memory_order_acquire) == token
               ? slot->signals.load(std::memory_order_relaxed)
               : 0;
}

} // namespace smc
