// SPDX-License-Identifier: MIT
// ShmIsm's DMB table: register, unregister, in-process attach and move_data, grants, revoke.
#include "smc/ism/shm_ism.h"

#include <cstring>
#include <new>

#include <unistd.h>

#include "smc/ism/doorbell.h"

namespace smc
{

ShmIsm::ShmIsm(Executor& executor, IsmGid gid, UniqueFd listener, std::size_t keptRemotes)
    : executor_(executor), gid_(gid), random_(std::random_device{}()),
      remotes_(keptRemotes / 2, keptRemotes), listener_(std::move(listener)),
      detacher_(std::make_shared<DmbDetacher>(*this))
{
    MutexLocker lock(mutex_);
    freeIndexes_.reserve(kMaxDmbs);
    for (std::uint32_t i = kMaxDmbs; i-- > 0;)
        freeIndexes_.push_back(i); // hand out low indexes first
}

ShmIsm::~ShmIsm()
{
    // No new connection, then no connection callback: unwatch waits for a
    // running one. A callback that already took its entry out touches
    // nothing of ours after that (onConnectionReadable).
    if (listenWatch_ >= 0)
        executor_.unwatch(listenWatch_);
    std::map<std::uint64_t, Pending> pending;
    {
        MutexLocker lock(serverMutex_);
        pending.swap(pending_);
    }
    for (auto& [id, p] : pending)
        executor_.unwatch(p.watch);
    detacher_->cut();
}

Result<void> ShmIsm::queryRemoteGid(const IsmGid& peer) const noexcept
{
    if (peer.gid == gid_.gid && peer.gidExt != 0)
        return {};
    return std::make_error_code(std::errc::host_unreachable);
}

ShmIsm::Dmb* ShmIsm::find(DmbToken token)
{
    auto it = dmbs_.find(token);
    return it == dmbs_.end() ? nullptr : &it->second;
}

const ShmIsm::Dmb* ShmIsm::find(DmbToken token) const
{
    auto it = dmbs_.find(token);
    return it == dmbs_.end() ? nullptr : &it->second;
}

// Random, nonzero, unique among live DMBs: a token is no capability (a grant is), but it
// should not tell a guesser anything either.
DmbToken ShmIsm::newToken(DmbToken old)
{
    DmbToken token;
    do {
        token = random_();
    } while (token == 0 || token == old || dmbs_.count(token) != 0);
    return token;
}

Result<DmbInfo> ShmIsm::registerDmb(std::shared_ptr<std::byte> memory, std::size_t size)
{
    if (!memory || size == 0 || !allocator_.owns(memory.get(), size))
        return std::make_error_code(std::errc::invalid_argument);
    Result<doorbell::Pair> bell = doorbell::make();
    if (!bell)
        return bell.error();
    MutexLocker lock(mutex_);
    if (freeIndexes_.empty())
        return IsmErrc::DmbLimitReached;
    const DmbToken token = newToken(0);
    Dmb dmb;
    dmb.index = freeIndexes_.back();
    dmb.size = size;
    dmb.memory = std::move(memory);
    dmb.bell = std::move(*bell);
    DmbInfo info{token, dmb.index, dmb.memory.get(), size};
    dmbs_.emplace(token, std::move(dmb));
    freeIndexes_.pop_back();
    return info;
}

// Fresh pages and a fresh doorbell for a DMB a peer process has seen, under a new token (a
// peer that kept its mapping of the old pages must not take it for these). Returns the token.
Result<DmbToken> ShmIsm::renew(DmbToken token)
{
    auto it = dmbs_.find(token);
    Dmb& dmb = it->second;
    if (!dmb.exposedTo)
        return token;
    Result<doorbell::Pair> bell = doorbell::make();
    if (!bell)
        return bell.error();
    if (Result<void> r = allocator_.replacePages(dmb.memory.get(), dmb.size); !r)
        return r.error();
    dmb.bell = std::move(*bell);
    dmb.exposedTo.reset();
    dmb.retired = false;
    auto node = dmbs_.extract(it);
    node.key() = newToken(token);
    const DmbToken renewed = node.key();
    dmbs_.insert(std::move(node));
    return renewed;
}

Result<void> ShmIsm::unregisterDmb(DmbToken token)
{
    std::shared_ptr<std::byte> memory; // freed after the lock, if we held the last reference
    MutexLocker lock(mutex_);
    auto it = dmbs_.find(token);
    if (it == dmbs_.end())
        return IsmErrc::UnknownToken;
    // Best effort: the pool frees the memory next in every path we know of,
    // so a failure here exposes nothing; a re-registration of the same
    // memory after a failure would (documented in docs/design.md).
    Result<DmbToken> renewed = renew(token);
    it = dmbs_.find(renewed ? *renewed : token);
    memory = std::move(it->second.memory);
    freeIndexes_.push_back(it->second.index);
    dmbs_.erase(it);
    return {};
}

Result<DmbAttachment> ShmIsm::attachDmb(DmbToken token)
{
    MutexLocker lock(mutex_);
    Dmb* dmb = find(token);
    if (dmb == nullptr)
        return IsmErrc::UnknownToken;
    ++dmb->attached;
    return DmbAttachment(detacher_, token, dmb->memory, dmb->size);
}

void ShmIsm::detachDmb(DmbToken token) noexcept
{
    MutexLocker lock(mutex_);
    Dmb* dmb = find(token);
    if (dmb != nullptr && dmb->attached > 0)
        --dmb->attached;
}

Result<void> ShmIsm::moveData(DmbToken token, std::size_t offset, std::span<const std::byte> data,
                              bool signal) noexcept
{
    MutexLocker lock(mutex_);
    Dmb* dmb = find(token);
    if (dmb == nullptr)
        return IsmErrc::UnknownToken;
    if (offset > dmb->size || data.size() > dmb->size - offset)
        return IsmErrc::OutOfBounds;
    if (!data.empty())
        std::memcpy(dmb->memory.get() + offset, data.data(), data.size());
    if (signal)
        doorbell::ring(dmb->bell.button.get());
    return {};
}

Result<void> ShmIsm::signal(DmbToken token) noexcept
{
    return moveData(token, 0, {}, true);
}

Result<DmbToken> ShmIsm::grant(DmbToken token, const IsmGid& peer)
{
    MutexLocker lock(mutex_);
    Dmb* dmb = find(token);
    if (dmb == nullptr)
        return IsmErrc::UnknownToken;
    if (dmb->exposedTo && (dmb->retired || *dmb->exposedTo != peer)) {
        Result<DmbToken> renewed = renew(token);
        if (!renewed)
            return renewed;
        token = *renewed;
        dmb = find(token);
    }
    dmb->grant = peer;
    return token;
}

Result<DmbToken> ShmIsm::revoke(DmbToken token)
{
    MutexLocker lock(mutex_);
    Dmb* dmb = find(token);
    if (dmb == nullptr)
        return IsmErrc::UnknownToken;
    dmb->grant.reset();
    dmb->retired = dmb->exposedTo.has_value();
    return renew(token);
}

void ShmIsm::dropGrant(DmbToken token)
{
    MutexLocker lock(mutex_);
    if (Dmb* dmb = find(token))
        dmb->grant.reset();
}

void ShmIsm::keepRemote(const IsmGid& owner, RemoteDmb dmb) noexcept
{
    dmb.forgetOffer();
    try {
        remotes_.keep(owner, std::move(dmb));
    } catch (const std::bad_alloc&) { // not kept: unmapped now
    }
}

void ShmIsm::trimRemotes()
{
    remotes_.trim();
}

Result<void> ShmIsm::offer(DmbToken token, int fd)
{
    MutexLocker lock(mutex_);
    const Dmb* dmb = find(token);
    if (dmb == nullptr)
        return IsmErrc::UnknownToken;
    doorbell::dropOffers(dmb->bell.button.get()); // a last connection's, never taken
    return doorbell::offer(dmb->bell.ear.get(), fd);
}

void ShmIsm::dropOffers(DmbToken token)
{
    MutexLocker lock(mutex_);
    if (const Dmb* dmb = find(token))
        doorbell::dropOffers(dmb->bell.button.get());
}

int ShmIsm::signalFd(DmbToken token) const noexcept
{
    MutexLocker lock(mutex_);
    const Dmb* dmb = find(token);
    return dmb == nullptr ? -1 : dmb->bell.ear.get();
}

std::uint64_t ShmIsm::drainSignals(DmbToken token) noexcept
{
    MutexLocker lock(mutex_);
    const Dmb* dmb = find(token);
    return dmb == nullptr ? 0 : doorbell::drain(dmb->bell.ear.get());
}

ShmIsmStats ShmIsm::stats() const noexcept
{
    std::uint64_t dmbs = 0;
    {
        MutexLocker lock(mutex_);
        dmbs = dmbs_.size();
    }
    return {served_.load(std::memory_order_relaxed),
            refused_.load(std::memory_order_relaxed),
            dmbs,
            remoteDmbs_->load(std::memory_order_relaxed),
            attachesKept_.load(std::memory_order_relaxed),
            remotes_.size()};
}

} // namespace smc
