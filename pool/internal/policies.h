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

namespace smc
{

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
    // A released buffer (state Free, of that kind and class) is available
    // again. Another thread may already have claimed it: read nothing from it.
    virtual void putBack(ThreadState& t, BufferDesc& d, BufferKind kind, unsigned cls) noexcept = 0;
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
        // The hook is read under the lock: neighbours' inserts and erases
        // write it, and reclaim removes buffers while others come and go.
        std::unique_lock lock(lockOf(d.kind(), d.sizeClass()));
        if (!DescAccess::bucketHook(d).is_linked())
            return;
        auto& list = lists_[index(d.kind())][d.sizeClass()];
        list.erase(list.iterator_to(d));
    }

    void putBack(ThreadState&, BufferDesc&, BufferKind, unsigned) noexcept override {}

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
    // lists_[k][c] is guarded by lockOf(k, c), a lock picked at run time,
    // which clang's -Wthread-safety cannot express; TSan checks it in CI.
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
// Linux's llist from having several concurrent poppers). A descriptor's
// onStack flag keeps it from being linked twice.
class FreeStack
{
public:
    // Push the chain first..last (already linked through nextFree, each
    // marked onStack) in one CAS.
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
                                            std::memory_order_acquire, std::memory_order_acquire)) {
                DescAccess::onStack(d).store(false, std::memory_order_release);
                return &d;
            }
        }
    }

private:
    std::atomic<std::uint64_t> head_{0};
};

// Ours: a bounded per-thread magazine per bucket in front of a lock-free free
// stack per bucket. A thread that releases a buffer usually reuses it next,
// touching only its own cache lines: no lock, one CAS (the claim). Magazines
// are hints, never ownership, so no buffer is ever stranded in one: a thread
// short of memory claims free buffers wherever they are (BufferPoolCore::
// scavenge). Nothing here is locked by link changes.
class MagazinePolicy final : public BucketPolicy
{
public:
    explicit MagazinePolicy(const DescTable& table) : table_(table) {}

    // Large buffers are cached sparingly: at most 4 MiB per bucket and thread
    // (a table: the release path must not divide).
    static constexpr std::array<std::uint32_t, kSizeClasses> kCapacity = [] {
        std::array<std::uint32_t, kSizeClasses> caps{};
        for (unsigned c = 0; c < kSizeClasses; ++c) {
            const std::size_t budget = (std::size_t{4} << 20) / classBytes(c);
            caps[c] = budget >= Magazine::kSlots ? Magazine::kSlots
                                                 : (budget == 0 ? 1u : std::uint32_t(budget));
        }
        return caps;
    }();

    BufferDesc* reuse(ThreadState& t, BufferKind kind, unsigned cls,
                      std::uint64_t& generation) noexcept override
    {
        const unsigned k = static_cast<unsigned>(kind);
        Magazine& m = t.magazines[k][cls];
        while (m.count > 0) {
            BufferDesc* d = m.slots[--m.count];
            if (claimAs(*d, kind, cls, generation))
                return d;
        }
        while (BufferDesc* d = stacks_[k][cls].stack.pop(table_))
            if (claimAs(*d, kind, cls, generation))
                return d;
        return nullptr;
    }

    void insert(BufferDesc&) noexcept override {}
    void remove(BufferDesc&) noexcept override {}

    void putBack(ThreadState& t, BufferDesc& d, BufferKind kind, unsigned cls) noexcept override
    {
        const unsigned k = static_cast<unsigned>(kind);
        Magazine& m = t.magazines[k][cls];
        if (m.count < kCapacity[cls]) {
            m.slots[m.count++] = &d;
            return;
        }
        // Full: hand this buffer and the older half of the magazine to the
        // shared stack in one CAS, keeping the most recently used ones local.
        const std::uint32_t keep = m.count / 2;
        BufferDesc* first = nullptr;
        BufferDesc* last = nullptr;
        auto link = [&](BufferDesc& x) {
            if (DescAccess::onStack(x).exchange(true, std::memory_order_acq_rel))
                return; // a stale hint for a buffer already on a stack
            if (last != nullptr)
                DescAccess::nextFree(*last).store(DescAccess::index(x) + 1,
                                                  std::memory_order_relaxed);
            else
                first = &x;
            last = &x;
        };
        link(d);
        for (std::uint32_t i = keep; i < m.count; ++i)
            link(*m.slots[i]);
        if (first != nullptr)
            stacks_[k][cls].stack.push(*first, *last);
        m.count = keep;
    }

    void lockForLinkChange() noexcept override {}
    void unlockForLinkChange() noexcept override {}

private:
    // Claim a hinted buffer and check it is still what the hint said: its
    // descriptor may have been freed and reborn as another class meanwhile.
    static bool claimAs(BufferDesc& d, BufferKind kind, unsigned cls,
                        std::uint64_t& generation) noexcept
    {
        if (!tryClaim(d, generation))
            return false;
        if (d.kind() == kind && d.sizeClass() == cls)
            return true;
        DescAccess::state(d).store(DescAccess::pack(generation, DescAccess::kFree),
                                   std::memory_order_release);
        return false;
    }

    struct alignas(64) PaddedStack {
        FreeStack stack;
    };

    const DescTable& table_;
    std::array<std::array<PaddedStack, kSizeClasses>, kBufferKinds> stacks_;
};

} // namespace smc
