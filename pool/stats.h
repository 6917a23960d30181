// SPDX-License-Identifier: MIT
// Pool statistics, counted like Linux's SMC stats (per kind; allocs, reuses, downgrades, gauges).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "pool/size_class.h"

namespace smc
{

struct KindStats {
    std::uint64_t allocs = 0;     // buffers created (Linux alloc_cnt)
    std::uint64_t reuses = 0;     // free buffers handed out again (reuse_cnt)
    std::uint64_t downgrades = 0; // acquires served from a smaller class (dgrade_cnt)
    std::uint64_t failures = 0;   // acquires that returned an error
    std::uint64_t releases = 0;
    // Buffers given back to the system: reclaimed, refused by the registrar,
    // or freed at teardown.
    std::uint64_t freed = 0;
    // Of those, free buffers trimmed (unregistered and freed) to make room
    // for another buffer under PoolConfig::memoryLimit, or by trim(), and
    // their bytes.
    std::uint64_t reclaimed = 0;
    std::uint64_t reclaimedBytes = 0;
    std::int64_t inUseBytes = 0;   // gauge: bytes currently leased (Linux rmbuse)
    std::uint64_t pooledBytes = 0; // gauge: bytes the pool owns, leased or free (alloc_rmbs)
    std::uint64_t descriptors = 0; // gauge: buffers the pool owns
    std::array<std::uint64_t, kSizeClasses> classHistogram{}; // leases per size class
};

struct PoolStats {
    KindStats rmb;
    KindStats sndbuf;

    std::string toJson() const;
};

} // namespace smc
