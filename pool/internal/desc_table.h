// SPDX-License-Identifier: MIT
// DescTable: the pool's descriptors in stable, index-addressed chunks.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "base/mutex.h"
#include "pool/buffer_desc.h"
#include "pool/internal/desc_access.h"

namespace smc
{

// Descriptors never move and are never freed before the pool: a 32-bit index
// names one for the lock-free free stacks, and link scans may walk the table
// while buffers come and go. A slot whose buffer was freed is "vacant" and is
// recycled for the next new buffer.
//
// Slots are handed out in runs, one run per creating thread: a run is
// kRunSlots consecutive slots that fill whole pages (chunks are page
// aligned), so the descriptors one thread creates share no page with
// another thread's. A thread writes its descriptors' state on every acquire
// and release; the other cores' hardware prefetchers pull in lines next to
// the ones they use, and a neighbour's state line pulled away from its owner
// costs that owner a cache-line transfer per claim (measured: a thread using
// one size class next to one using four ran at 40% of its speed).
class DescTable
{
public:
    // One thread's current run: [next, end). Only touched under the table's
    // mutex; kept by the caller (one per thread), registered on first use.
    struct Run {
        std::uint32_t next = 0;
        std::uint32_t end = 0;
        bool registered = false;
    };

    static constexpr unsigned kChunkBits = 10;
    static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
    static constexpr unsigned kMaxChunks = 64;
    static constexpr std::uint32_t kMaxCapacity = kChunkSize * kMaxChunks;
    static constexpr std::size_t kPageBytes = 4096;
    // The fewest slots that fill whole pages.
    static constexpr std::uint32_t kRunSlots = [] {
        std::uint32_t n = 1;
        while ((n * sizeof(BufferDesc)) % kPageBytes != 0)
            ++n;
        return n;
    }();
    static_assert(kChunkSize % kRunSlots == 0, "runs must not straddle chunks");
    static_assert((kChunkSize * sizeof(BufferDesc)) % kPageBytes == 0);

    explicit DescTable(std::uint32_t capacity) : capacity_(capacity) {}
    ~DescTable()
    {
        for (auto& chunk : chunks_) {
            BufferDesc* c = chunk.load(std::memory_order_relaxed);
            if (c == nullptr)
                continue;
            for (std::uint32_t i = 0; i < kChunkSize; ++i)
                c[i].~BufferDesc();
            std::free(c);
        }
    }
    DescTable(const DescTable&) = delete;
    DescTable& operator=(const DescTable&) = delete;

    BufferDesc& at(std::uint32_t index) const noexcept
    {
        return chunks_[index >> kChunkBits].load(
            std::memory_order_acquire)[index & (kChunkSize - 1)];
    }

    // Slots [0, highWater()) exist; each is live or vacant.
    std::uint32_t highWater() const noexcept { return highWater_.load(std::memory_order_acquire); }

    // A vacant descriptor, or null when the table is full (or out of memory).
    // `run` is the calling thread's (see Run).
    BufferDesc* claim(Run& run) noexcept
    {
        MutexLocker lock(mutex_);
        if (!vacant_.empty()) {
            BufferDesc* d = vacant_.back();
            vacant_.pop_back();
            return d;
        }
        if (run.next < run.end)
            return &at(run.next++);
        const std::uint32_t index = highWater_.load(std::memory_order_relaxed);
        if (index >= capacity_)
            return stealSlot(); // the table is full but for other threads' runs
        auto& chunk = chunks_[index >> kChunkBits];
        if (chunk.load(std::memory_order_relaxed) == nullptr) {
            void* raw = std::aligned_alloc(kPageBytes, kChunkSize * sizeof(BufferDesc));
            if (raw == nullptr)
                return nullptr;
            BufferDesc* fresh = static_cast<BufferDesc*>(raw);
            for (std::uint32_t i = 0; i < kChunkSize; ++i) {
                new (&fresh[i]) BufferDesc();
                DescAccess::setIndex(fresh[i], (index & ~(kChunkSize - 1)) + i);
            }
            chunk.store(fresh, std::memory_order_release);
        }
        const std::uint32_t end = std::min(index + kRunSlots, capacity_);
        try {
            vacant_.reserve(end); // vacate() must not fail later
            if (!run.registered)
                runs_.push_back(&run);
        } catch (const std::bad_alloc&) {
            return nullptr;
        }
        run.registered = true;
        highWater_.store(end, std::memory_order_release);
        run.next = index + 1;
        run.end = end;
        return &at(index);
    }

    void vacate(BufferDesc& d) noexcept
    {
        MutexLocker lock(mutex_);
        vacant_.push_back(&d);
    }

    template <typename F> void forEach(F&& f) const
    {
        const std::uint32_t n = highWater();
        for (std::uint32_t i = 0; i < n; ++i)
            f(at(i));
    }

    // forEach until `f` returns true.
    template <typename F> void forEachUntil(F&& f) const
    {
        const std::uint32_t n = highWater();
        for (std::uint32_t i = 0; i < n; ++i)
            if (f(at(i)))
                return;
    }

private:
    // An unused slot of some thread's run: the table never refuses a
    // descriptor while it has a slot nobody uses.
    BufferDesc* stealSlot() noexcept SMC_REQUIRES(mutex_)
    {
        for (Run* r : runs_)
            if (r->next < r->end)
                return &at(--r->end);
        return nullptr;
    }

    const std::uint32_t capacity_;
    std::array<std::atomic<BufferDesc*>, kMaxChunks> chunks_{};
    std::atomic<std::uint32_t> highWater_{0};
    Mutex mutex_; // claim/vacate only: the create and free paths
    std::vector<BufferDesc*> vacant_ SMC_GUARDED_BY(mutex_);
    std::vector<Run*> runs_ SMC_GUARDED_BY(mutex_); // every thread's, for stealSlot
};

} // namespace smc
