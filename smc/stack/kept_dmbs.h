// SPDX-License-Identifier: MIT
// KeptDmbs: SMC-D RMBs of ours that stay granted to the peer process of their last connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "pool/buffer_desc.h"
#include "smc/ism/ism_device.h"

namespace smc
{

// A connection to a process we talked to before takes an RMB that process has mapped
// already, under the same token (ShmIsm keeps pages and token for a grant to the same peer):
// no fresh pages here, no attach round trip and no mmap there. The trust rules hold:
//   - an RMB is kept for the one peer process its pages were granted to, and given to no
//     other (the pool gets it back only through a revoke: fresh pages, a new token);
//   - it is taken again only once the peer's last CDC in its head says the peer closed or
//     aborted: an honest peer writes nothing after that, so no late byte of the last
//     connection lands in the next one's ring (a dishonest one can only spoil its own);
//   - the head is cleared before the next grant.
// Bounded: at most `perPeerBytes` of RMBs kept for one peer, `totalBytes` and `maxCount` in
// all; trim()
// hands back what nobody took since the trim before. Thread-safe; never blocks but for its
// short lock.
class KeptDmbs
{
public:
    KeptDmbs(std::size_t perPeerBytes, std::size_t totalBytes, std::size_t maxCount)
        : perPeerBytes_(perPeerBytes), totalBytes_(totalBytes), maxCount_(maxCount)
    {
    }

    // Keeps `rmb` for `peer`; returns it back (to go to the pool) when full.
    BufferRef keep(const IsmGid& peer, BufferRef rmb);
    // An RMB of `bytes` kept for `peer` that the peer is done with, its head cleared; empty if
    // none.
    BufferRef take(const IsmGid& peer, std::size_t bytes);
    // What was kept before the last trim() and not taken since.
    std::vector<BufferRef> trim();
    // Everything.
    std::vector<BufferRef> drain();
    std::size_t bytes() const;

private:
    using Peer = std::pair<std::uint64_t, std::uint64_t>;
    struct Entry {
        BufferRef rmb;
        std::uint64_t epoch = 0;
    };
    struct Kept {
        std::vector<Entry> entries; // oldest first
        std::size_t bytes = 0;
    };

    const std::size_t perPeerBytes_;
    const std::size_t totalBytes_;
    const std::size_t maxCount_;
    mutable Mutex mutex_;
    std::map<Peer, Kept> byPeer_ SMC_GUARDED_BY(mutex_);
    std::size_t bytes_ SMC_GUARDED_BY(mutex_) = 0;
    std::size_t count_ SMC_GUARDED_BY(mutex_) = 0;
    std::uint64_t epoch_ SMC_GUARDED_BY(mutex_) = 0;
};

} // namespace smc
