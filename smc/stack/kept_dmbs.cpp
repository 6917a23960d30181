// SPDX-License-Identifier: MIT
// KeptDmbs: per peer process, the RMBs it may get again, and when it may.
#include "smc/stack/kept_dmbs.h"

#include <atomic>

#include "smc/cdc/cdc_messages.h"

namespace smc
{

namespace
{

// Whether the peer's last CDC in this head says it is done with the DMB.
bool peerDone(const std::byte* head) noexcept
{
    const cdc::ConnFlags f = cdc::readSmcd(head).connFlags;
    return f.peerConnClosed || f.peerConnAbort;
}

// Word by word: the peer process maps these bytes too.
void clearHead(std::byte* head) noexcept
{
    static_assert(cdc::kSmcdHeadSize % sizeof(std::uint64_t) == 0);
    for (std::size_t at = 0; at < cdc::kSmcdHeadSize; at += sizeof(std::uint64_t))
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(head + at))
            .store(0, std::memory_order_relaxed);
}

} // namespace

BufferRef KeptDmbs::keep(const IsmGid& peer, BufferRef rmb)
{
    MutexLocker lock(mutex_);
    const std::size_t size = rmb.size();
    Kept& kept = byPeer_[{peer.gid, peer.gidExt}];
    if (bytes_ + size > totalBytes_ || kept.bytes + size > perPeerBytes_ || count_ >= maxCount_) {
        if (kept.entries.empty())
            byPeer_.erase({peer.gid, peer.gidExt});
        return rmb;
    }
    kept.entries.push_back({std::move(rmb), epoch_});
    kept.bytes += size;
    bytes_ += size;
    ++count_;
    return {};
}

BufferRef KeptDmbs::take(const IsmGid& peer, std::size_t bytes)
{
    MutexLocker lock(mutex_);
    auto it = byPeer_.find({peer.gid, peer.gidExt});
    if (it == byPeer_.end())
        return {};
    Kept& kept = it->second;
    for (auto e = kept.entries.begin(); e != kept.entries.end(); ++e) {
        if (e->rmb.size() != bytes || !peerDone(e->rmb.data()))
            continue;
        BufferRef rmb = std::move(e->rmb);
        kept.entries.erase(e);
        kept.bytes -= bytes;
        bytes_ -= bytes;
        --count_;
        if (kept.entries.empty())
            byPeer_.erase(it);
        clearHead(rmb.data());
        return rmb;
    }
    return {};
}

std::vector<BufferRef> KeptDmbs::trim()
{
    std::vector<BufferRef> out;
    MutexLocker lock(mutex_);
    for (auto it = byPeer_.begin(); it != byPeer_.end();) {
        Kept& kept = it->second;
        auto stay = kept.entries.begin();
        for (Entry& e : kept.entries) { // the lock's scope, not a lambda's: -Wthread-safety
            if (e.epoch >= epoch_) {
                *stay++ = std::move(e);
                continue;
            }
            kept.bytes -= e.rmb.size();
            bytes_ -= e.rmb.size();
            --count_;
            out.push_back(std::move(e.rmb));
        }
        kept.entries.erase(stay, kept.entries.end());
        it = kept.entries.empty() ? byPeer_.erase(it) : std::next(it);
    }
    ++epoch_;
    return out;
}

std::vector<BufferRef> KeptDmbs::drain()
{
    std::vector<BufferRef> out;
    MutexLocker lock(mutex_);
    for (auto& [peer, kept] : byPeer_)
        for (Entry& e : kept.entries)
            out.push_back(std::move(e.rmb));
    byPeer_.clear();
    bytes_ = 0;
    count_ = 0;
    return out;
}

std::size_t KeptDmbs::bytes() const
{
    MutexLocker lock(mutex_);
    return bytes_;
}

} // namespace smc
