// SPDX-License-Identifier: MIT
// The three bucket policies: Linux-style list walks under a global or per-bucket rwlock, and ours.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>

#include <boost/intrusive/list.hpp>

#include "pool/buffer_desc.h"
#include "pool/internal/desc_access.h"
#include "pool/internal/desc_table.h"
#include "pool/internal/thread_state.h"
#include "pool/size_class.h"

namespace smc {

// Claim a free buffer: Free -> Used with the next generation. Fails if someone
// else holds it or got there first.
inline bool tryClaim(BufferDesc& d, std::uint64_t& generation) noexcept
{
    auto& state = DescAccess::state(d);
    std::uint64_t s = state.load(std::memory_order_relaxed);
    if ((s & DescAccess::kUseMask) != DescAccess::kFree)
        return false;
    const std::uint64_t g = DescAccess::generationOf(s) + 1;
    if (!state.compare_exchange_strong(s, DescAccess::pack(g, DescAccess::kUsed),
                                       std::memory_order_acquire, std::memory_order_relaxed))
        return false;
    generation = g;
    return true;
}

// What the pool core asks of a policy. Claiming (tryClaim) and the used/free
// state live in the descriptor; a policy only decides where free buffers are
// found and what a link change must exclude.
class BucketPolicy
{
public:
    virtual ~BucketPolicy() = default;
    // A claimed free buffer of (kind, class), or null.
    virtual BufferDesc* reuse(ThreadState& t, BufferKind kind, unsigned cls,
                              std::uint64_t& generation) noexcept = 0;
    // A new buffer (already claimed) joins its bucket.
    virtual void insert(BufferDesc& d) noexcept = 0;
    // A buffer that is about to be freed leaves its bucket. It is not free.
    virtual void remove(BufferDesc& d) noexcept = 0;
    // A released buffer (state Free) is available again.
    virtual void putBack(ThreadState& t, BufferDesc& d) noexcept = 0;
    // Per-thread caches back to the shared lists.
    virtual void drain(ThreadState& t) noexcept = 0;
    // Held across a link add/remove scan: what Linux's write lock excludes.
    virtual void lockForLinkChange() noexcept = 0;
    virtual void unlockForLinkChange() noexcept = 0;
};

// Linux's design: every buffer of a class on one list, new ones at the head;
// reuse walks the list under a read lock and claims the first free one
// (O(list length)); inserts, removals and link changes take the write lock.
// `perBucket` picks one rwlock per (kind, class) instead of one per kind.
class LinuxListPolicy final : public BucketPolicy
{
public:
    explicit LinuxListPolicy(bool perBucket) : perBucket_(perBucket) {}
    ~LinuxListPolicy() override
    {
        for (auto& kind : lists_)
            for (auto& list : kind)
                list.clear();
    }

    BufferDesc* reuse(ThreadState&, BufferKind kind, unsigned cls,
                      std::uint64_t& generation) noexcept override
    {
        std::shared_lock lock(lockOf(kind, cls));
        for (BufferDesc& d : lists_[index(kind)][cls])
            if (tryClaim(d, generation))
                return &d;
        return nullptr;
    }

    void insert(BufferDesc& d) noexcept override
    {
        std::unique_lock lock(lockOf(d.kind(), d.sizeClass()));
        lists_[index(d.kind())][d.sizeClass()].push_front(d);
    }

    void remove(BufferDesc& d) noexcept override
    {
        if (!DescAccess::bucketHook(d).is_linked())
            return;
        std::unique_lock lock(lockOf(d.kind(), d.sizeClass()));
        auto& list = lists_[index(d.kind())][d.sizeClass()];
        list.erase(list.iterator_to(d));
    }

    void putBack(ThreadState&, BufferDesc&) noexcept override {}
    void drain(ThreadState&) noexcept override {}

    // Fixed order: kind, then ascending class.
    void lockForLinkChange() noexcept override
    {
        forEachLock([](std::shared_mutex& m) { m.lock(); });
    }
    void unlockForLinkChange() noexcept override
    {
        forEachLock([](std::shared_mutex& m) { m.unlock(); });
    }

private:
    using List = boost::intrusive::list<BufferDesc, DescAccess::BucketHook,
                                        boost::intrusive::constant_time_size<false>>;

    // Each lock on its own cache line, so buckets do not share one by accident.
    struct alignas(64) PaddedLock {
        std::shared_mutex mutex;
    };

    static unsigned index(BufferKind kind) noexcept { return static_cast<unsigned>(kind); }

    std::shared_mutex& lockOf(BufferKind kind, unsigned cls) noexcept
    {
        return perBucket_ ? bucketLocks_[index(kind)][cls].mutex : kindLocks_[index(kind)].mutex;
    }

    template <typename F> void forEachLock(F&& f) noexcept
    {
        for (unsigned k = 0; k < kBufferKinds; ++k) {
            if (!perBucket_) {
                f(kindLocks_[k].mutex);
                continue;
            }
            for (unsigned c = 0; c < kSizeClasses; ++c)
                f(bucketLocks_[k][c].mutex);
        }
    }

    const bool perBucket_;
    std::array<PaddedLock, kBufferKinds> kindLocks_;
    std::array<std::array<PaddedLock, kSizeClasses>, kBufferKinds> bucketLocks_;
    std::array<std::array<List, kSizeClasses>, kBufferKinds> lists_;
};

// A Treiber stack of free descriptors, addressed by table index. The head
// packs (tag << 32 | index + 1) and the tag moves on every push and pop, so a
// descriptor that left and came back between a pop's read and its CAS makes
// the CAS fail instead of corrupting the stack (the ABA problem that bars
// Linux's llist from having several concurrent poppers).
class FreeStack
{
public:
    void push(BufferDesc& first, BufferDesc& last) noexcept
    {
        std::uint64_t head = head_.load(std::memory_order_relaxed);
        const std::uint64_t firstRef = DescAccess::index(first) + 1;
        do {
            DescAccess::nextFree(last).store(static_cast<std::uint32_t>(head),
                                             std::memory_order_relaxed);
        } while (!head_.compare_exchange_weak(head, ((head >> 32) + 1) << 32 | firstRef,
                                              std::memory_order_release,
                                              std::memory_order_relaxed));
    }

    BufferDesc* pop(const DescTable& table) noexcept
    {
        std::uint64_t head = head_.load(std::memory_order_acquire);
        for (;;) {
            const std::uint32_t ref = static_cast<std::uint32_t>(head);
            if (ref == 0)
                return nullptr;
            BufferDesc& d = table.at(ref - 1);
            // May read a stale link if d was popped meanwhile; the tag check
            // in the CAS then fails and we retry.
            const std::uint64_t next = DescAccess::nextFree(d).load(std::memory_order_relaxed);
            if (head_.compare_exchange_weak(head, ((head >> 32) + 1) << 32 | next,
                                            std::memory_order_acquire,
                                            std::memory_order_acquire))
                return &d;
        }
    }

private:
    std::atomic<std::uint64_t> head_{0};
};

// Ours: a bounded per-thread magazine per bucket in front of a lock-free free
// stack per bucket. A thread that releases a buffer usually reuses it next,
// touching only its own cache lines. Nothing here is locked by link changes.
class MagazinePolicy final : public BucketPolicy
{
public:
    explicit MagazinePolicy(const DescTable& table) : table_(table) {}

    // Large buffers are cached sparingly: at most 4 MiB per bucket and thread.
    static constexpr std::uint32_t capacity(unsigned cls) noexcept
    {
        const std::size_t budget = (std::size_t{4} << 20) / classBytes(cls);
        return budget >= Magazine::kSlots ? Magazine::kSlots
                                          : (budget == 0 ? 1 : static_cast<std::uint32_t>(budget));
    }

    BufferDesc* reuse(ThreadState& t, BufferKind kind, unsigned cls,
                      std::uint64_t& generation) noexcept override
    {
        const unsigned k = static_cast<unsigned>(kind);
        BufferDesc* d = nullptr;
        {
            std::lock_guard lock(t.cacheLock);
            Magazine& m = t.magazines[k][cls];
            if (m.count > 0)
                d = m.slots[--m.count];
        }
        if (d == nullptr)
            d = stacks_[k][cls].stack.pop(table_);
        // A buffer in a cache or on a stack is free and reachable from
        // nowhere else, so the claim cannot fail.
        if (d != nullptr && !tryClaim(*d, generation))
            return nullptr;
        return d;
    }

    void insert(BufferDesc&) noexcept override {}
    void remove(BufferDesc&) noexcept override {}

    void putBack(ThreadState& t, BufferDesc& d) noexcept override
    {
        const unsigned k = static_cast<unsigned>(d.kind());
        const unsigned cls = d.sizeClass();
        std::lock_guard lock(t.cacheLock);
        Magazine& m = t.magazines[k][cls];
        if (m.count < capacity(cls)) {
            m.slots[m.count++] = &d;
            return;
        }
        // Full: hand this buffer and the older half of the cache to the shared
        // stack in one CAS, keeping the most recently used ones local.
        const std::uint32_t keep = m.count / 2;
        BufferDesc* last = &d;
        for (std::uint32_t i = keep; i < m.count; ++i) {
            DescAccess::nextFree(*last).store(DescAccess::index(*m.slots[i]) + 1,
                                              std::memory_order_relaxed);
            last = m.slots[i];
        }
        stacks_[k][cls].stack.push(d, *last);
        m.count = keep;
    }

    void drain(ThreadState& t) noexcept override
    {
        std::lock_guard lock(t.cacheLock);
        for (unsigned k = 0; k < kBufferKinds; ++k) {
            for (unsigned c = 0; c < kSizeClasses; ++c) {
                Magazine& m = t.magazines[k][c];
                for (std::uint32_t i = 0; i < m.count; ++i)
                    stacks_[k][c].stack.push(*m.slots[i], *m.slots[i]);
                m.count = 0;
            }
        }
    }

    void lockForLinkChange() noexcept override {}
    void unlockForLinkChange() noexcept override {}

private:
    struct alignas(64) PaddedStack {
        FreeStack stack;
    };

    const DescTable& table_;
    std::array<std::array<PaddedStack, kSizeClasses>, kBufferKinds> stacks_;
};

} // namespace smc
