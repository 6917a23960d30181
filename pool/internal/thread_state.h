// SPDX-License-Identifier: MIT
// ThreadState: what one thread keeps per pool: buffer caches, counters, its registration epoch.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "pool/buffer_desc.h"
#include "pool/internal/desc_table.h"
#include "pool/size_class.h"
#include "pool/stats.h"

namespace smc
{

// Counters with a single writer (the owning thread): a relaxed load+store is
// enough and costs no locked instruction; stats() sums them with relaxed loads.
struct KindCounters {
    std::atomic<std::uint64_t> allocs{0}, reuses{0}, downgrades{0}, failures{0}, releases{0};
    std::atomic<std::int64_t> inUseBytes{0};
    std::array<std::atomic<std::uint64_t>, kSizeClasses> classHistogram{};
};

template <typename T> inline void bump(std::atomic<T>& counter, T delta = 1) noexcept
{
    counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

// A small stack of buffers of one (kind, class) that this thread released:
// hints, not ownership. Only the owning thread touches it; whoever claims a
// buffer (Free -> Used on the descriptor) owns it, so an entry may be stale
// and is checked when popped.
struct Magazine {
    static constexpr unsigned kSlots = 8;
    std::uint32_t count = 0;
    std::array<BufferDesc*, kSlots> slots{};
};

struct alignas(64) ThreadState {
    std::array<std::array<Magazine, kSizeClasses>, kBufferKinds> magazines{};

    // Non-zero while this thread registers a buffer (see BufferPoolCore::synchronize).
    std::atomic<std::uint64_t> readEpoch{0};

    std::array<KindCounters, kBufferKinds> counters{};

    // The slots this thread creates descriptors in (DescTable::claim).
    DescTable::Run descRun;

    ThreadState* next = nullptr; // the pool's registry of all thread states
};

} // namespace smc
