// SPDX-License-Identifier: MIT
// DescTable: the pool's descriptors in stable, index-addressed chunks.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
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
class DescTable
{
public:
    static constexpr unsigned kChunkBits = 10;
    static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
    static constexpr unsigned kMaxChunks = 64;
    static constexpr std::uint32_t kMaxCapacity = kChunkSize * kMaxChunks;

    explicit DescTable(std::uint32_t capacity) : capacity_(capacity) {}
    ~DescTable()
    {
        for (auto& chunk : chunks_)
            delete[] chunk.load(std::memory_order_relaxed);
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
    BufferDesc* claim() noexcept
    {
        MutexLocker lock(mutex_);
        if (!vacant_.empty()) {
            BufferDesc* d = vacant_.back();
            vacant_.pop_back();
            return d;
        }
        const std::uint32_t index = highWater_.load(std::memory_order_relaxed);
        if (index >= capacity_)
            return nullptr;
        auto& chunk = chunks_[index >> kChunkBits];
        if (chunk.load(std::memory_order_relaxed) == nullptr) {
            BufferDesc* fresh = new (std::nothrow) BufferDesc[kChunkSize];
            if (fresh == nullptr)
                return nullptr;
            for (std::uint32_t i = 0; i < kChunkSize; ++i)
                DescAccess::setIndex(fresh[i], index + i);
            chunk.store(fresh, std::memory_order_release);
        }
        try {
            vacant_.reserve(index + 1); // vacate() must not fail later
        } catch (const std::bad_alloc&) {
            return nullptr;
        }
        highWater_.store(index + 1, std::memory_order_release);
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
    const std::uint32_t capacity_;
    std::array<std::atomic<BufferDesc*>, kMaxChunks> chunks_{};
    std::atomic<std::uint32_t> highWater_{0};
    Mutex mutex_; // claim/vacate only: the create and free paths
    std::vector<BufferDesc*> vacant_ SMC_GUARDED_BY(mutex_);
};

} // namespace smc
