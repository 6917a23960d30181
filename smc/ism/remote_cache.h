// SPDX-License-Identifier: MIT
// RemoteCache: peers' DMBs we mapped and are done with, kept for their owner's next grant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "smc/ism/ism_device.h"
#include "smc/ism/remote_dmb.h"

namespace smc
{

// An owner that gives us the same DMB again (ShmIsm keeps a token for one set of pages,
// granted to one peer process, for the token's whole life) costs no attach round trip, no
// mmap and no munmap if we kept the mapping. Bounded: at most `perOwner` mappings of one
// owner and `total` in all (each holds a mapping and one fd), the oldest going first; and
// trim() drops what nobody took since the trim before, so an owner that died or stopped
// talking to us costs nothing for long. Thread-safe; never blocks but for its short lock
// (munmap runs outside it).
class RemoteCache
{
public:
    RemoteCache(std::size_t perOwner, std::size_t total) : perOwner_(perOwner), total_(total) {}
    ~RemoteCache();
    RemoteCache(const RemoteCache&) = delete;
    RemoteCache& operator=(const RemoteCache&) = delete;

    // The mapping of `owner`'s `token` if one is kept (taken out), else an empty one.
    RemoteDmb take(const IsmGid& owner, DmbToken token);
    // Keeps `dmb` (of `owner`) for a later take(); an empty one is ignored.
    void keep(const IsmGid& owner, RemoteDmb dmb);
    // Drops the mappings kept before the last trim() and not taken since.
    void trim();
    std::size_t size() const;

private:
    struct Key {
        std::uint64_t gid, gidExt, token;
        auto operator<=>(const Key&) const = default;
    };
    struct KeyHash {
        std::size_t operator()(const Key& k) const noexcept
        {
            return std::hash<std::uint64_t>{}(k.token ^ (k.gidExt * 0x9e3779b97f4a7c15ull));
        }
    };
    struct Entry {
        Key key;
        RemoteDmb dmb;
        std::uint64_t epoch = 0; // trim() calls before it was kept
    };
    using List = std::list<Entry>;

    void dropLocked(List::iterator it, std::vector<RemoteDmb>& out) SMC_REQUIRES(mutex_);

    const std::size_t perOwner_;
    const std::size_t total_;
    mutable Mutex mutex_;
    List entries_ SMC_GUARDED_BY(mutex_); // oldest first
    std::unordered_map<Key, List::iterator, KeyHash> byKey_ SMC_GUARDED_BY(mutex_);
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t>
        perOwnerCount_ SMC_GUARDED_BY(mutex_);
    std::uint64_t epoch_ SMC_GUARDED_BY(mutex_) = 0;
};

} // namespace smc
