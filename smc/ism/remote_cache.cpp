// SPDX-License-Identifier: MIT
// RemoteCache: idle mappings of peers' DMBs by owner and token, oldest first, bounded.
#include "smc/ism/remote_cache.h"

namespace smc
{

RemoteCache::~RemoteCache() = default;

void RemoteCache::dropLocked(List::iterator it, std::vector<RemoteDmb>& out)
{
    const auto owner = std::make_pair(it->key.gid, it->key.gidExt);
    if (auto count = perOwnerCount_.find(owner);
        count != perOwnerCount_.end() && --count->second == 0)
        perOwnerCount_.erase(count);
    byKey_.erase(it->key);
    out.push_back(std::move(it->dmb));
    entries_.erase(it);
}

RemoteDmb RemoteCache::take(const IsmGid& owner, DmbToken token)
{
    std::vector<RemoteDmb> out;
    MutexLocker lock(mutex_);
    auto it = byKey_.find(Key{owner.gid, owner.gidExt, token});
    if (it == byKey_.end())
        return {};
    dropLocked(it->second, out);
    return std::move(out.front());
}

void RemoteCache::keep(const IsmGid& owner, RemoteDmb dmb)
{
    if (!dmb || total_ == 0 || perOwner_ == 0)
        return;
    std::vector<RemoteDmb> dropped; // unmapped after the lock
    MutexLocker lock(mutex_);
    const Key key{owner.gid, owner.gidExt, dmb.token()};
    if (auto old = byKey_.find(key); old != byKey_.end())
        dropLocked(old->second, dropped); // cannot be, but one entry per key
    std::size_t& count = perOwnerCount_[{owner.gid, owner.gidExt}];
    if (count >= perOwner_) { // this owner's oldest goes
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (it->key.gid == owner.gid && it->key.gidExt == owner.gidExt) {
                dropLocked(it, dropped);
                break;
            }
        }
    }
    if (entries_.size() >= total_)
        dropLocked(entries_.begin(), dropped);
    entries_.push_back(Entry{key, std::move(dmb), epoch_});
    byKey_.emplace(key, std::prev(entries_.end()));
    ++perOwnerCount_[{owner.gid, owner.gidExt}];
}

void RemoteCache::trim()
{
    std::vector<RemoteDmb> dropped;
    MutexLocker lock(mutex_);
    while (!entries_.empty() && entries_.front().epoch < epoch_)
        dropLocked(entries_.begin(), dropped);
    ++epoch_;
}

std::size_t RemoteCache::size() const
{
    MutexLocker lock(mutex_);
    return entries_.size();
}

} // namespace smc
