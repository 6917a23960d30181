// SPDX-License-Identifier: MIT
// BufferPoolCore: the pool's machinery behind BufferPool, shared by the pool's source files.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <tbb/enumerable_thread_specific.h>

#include "base/mutex.h"
#include "pool/buffer_pool.h"
#include "pool/internal/desc_access.h"
#include "pool/internal/desc_table.h"
#include "pool/internal/policies.h"
#include "pool/internal/thread_state.h"

namespace smc
{

constexpr unsigned linkBit(unsigned link) noexcept
{
    return 1u << link;
}

// The pool's machinery behind BufferPool's interface. Its members live in
// three files by job: buffer_pool.cpp (acquire and release, the public face),
// pool_links.cpp (link add/remove, registration), pool_buffers.cpp (creating
// and freeing buffers, the memory limit and reclaim, statistics).
//
// Registration and link changes (see docs/design.md): the links a buffer must
// be registered on are published in two masks, `usable_` (done) and `adding_`
// (in progress). A thread that registers a new buffer does so inside a
// read-side section (ThreadState::readEpoch); a link change publishes its new
// mask, then waits only for the sections that began before it (synchronize),
// the way RCU waits for readers. Reuse of a buffer that is already registered
// reads the mask and nothing else: it never waits for a link change.
// Per (buffer, link) a small state machine (Unregistered -> Busy ->
// Registered) makes sure one party registers and one party unregisters.
class BufferPoolCore
{
public:
    BufferPoolCore(const PoolConfig& config, Registrar& registrar);
    ~BufferPoolCore();

    void setOwner(BufferPool* owner) noexcept { owner_ = owner; }

    // buffer_pool.cpp. The fast path is acquire (inline there, for BufferPool::acquire);
    // everything else is acquireSlow's.
    inline Result<BufferRef> acquire(BufferKind kind, std::size_t bytes);
    Result<BufferRef> acquireSlow(ThreadState& t, BufferKind kind, std::size_t bytes,
                                  BufferDesc* claimed, std::uint64_t generation);
    Result<void> release(BufferRef ref);

    // pool_links.cpp.
    Result<void> addLink(unsigned link);
    Result<void> removeLink(unsigned link);
    unsigned linkMask() const noexcept { return usable_.load(std::memory_order_acquire); }

    // pool_buffers.cpp.
    std::size_t trim(std::size_t keepFreeBytes) noexcept;
    std::vector<BufferDesc*> buffers(BufferKind kind) const;
    PoolStats stats() const noexcept;
    const PoolConfig& config() const noexcept { return config_; }

private:
    // buffer_pool.cpp: the hot path's helpers, inline there (nobody else calls them).
    inline ThreadState& local();
    ThreadState& localSlow();
    inline BufferRef lease(KindCounters& counters, BufferDesc& d, std::uint64_t generation,
                           bool downgraded) noexcept;
    inline BufferDesc* reuse(ThreadState& t, BufferKind kind, unsigned cls,
                             std::uint64_t& generation) noexcept;
    inline void putBack(ThreadState& t, BufferDesc& d, BufferKind kind, unsigned cls) noexcept;
    BufferDesc* scavenge(BufferKind kind, unsigned cls, std::uint64_t& generation) noexcept;
    Result<BufferDesc*> createAfterReclaim(ThreadState& t, BufferKind kind, unsigned cls,
                                           std::uint64_t& generation);

    void enterRead(ThreadState& t) noexcept
    {
        t.readEpoch.store(epoch_.load(std::memory_order_seq_cst), std::memory_order_seq_cst);
    }
    void exitRead(ThreadState& t) noexcept { t.readEpoch.store(0, std::memory_order_release); }

    unsigned registrationMask() const noexcept
    {
        if (config_.tech == Tech::SmcD)
            return linkBit(0); // the ISM device
        return usable_.load(std::memory_order_seq_cst) | adding_.load(std::memory_order_seq_cst);
    }
    // On the fast path whenever a link is usable: here, so that it inlines.
    bool fullyRegistered(const BufferDesc& d) const noexcept
    {
        const unsigned mask = usable_.load(std::memory_order_acquire);
        for (unsigned link = 0; link < kMaxLinks; ++link)
            if ((mask & linkBit(link)) && !d.isRegistered(link))
                return false;
        return true;
    }

    // pool_links.cpp.
    void synchronize() noexcept;
    std::error_code registerOn(BufferDesc& d, unsigned link, bool wait) noexcept;
    void unregisterOn(BufferDesc& d, unsigned link) noexcept;
    std::error_code registerOnUsable(ThreadState& t, BufferDesc& d) noexcept;
    void unregisterAll(unsigned link) noexcept;

    // pool_buffers.cpp.
    Result<BufferDesc*> create(ThreadState& t, BufferKind kind, unsigned cls,
                               std::uint64_t& generation);
    void destroy(BufferDesc& d) noexcept;
    std::uint64_t leasedBytes() const noexcept;
    void reclaim(std::size_t bytes) noexcept SMC_REQUIRES(linkMutex_);
    // Frees free buffers while `more()` holds, wherever they are cached; how many.
    template <typename More> std::size_t reclaimWhile(More more) noexcept SMC_REQUIRES(linkMutex_);

    const PoolConfig config_;
    Registrar& registrar_;
    PageAllocator& allocator_;
    BufferPool* owner_ = nullptr;
    const std::uint64_t id_; // never reused, so a stale thread-local cache cannot match

    DescTable table_;
    std::unique_ptr<BucketPolicy> policy_;

    // Per-thread state: TBB finds a thread's own; the registry list lets
    // stats() and synchronize() visit them all, even while
    // new threads join.
    tbb::enumerable_thread_specific<ThreadState> threads_;
    std::atomic<ThreadState*> registry_{nullptr};

    std::atomic<std::uint64_t> epoch_{1};
    std::atomic<unsigned> usable_{0};
    std::atomic<unsigned> adding_{0};
    // Serialises link changes (the masks above are atomics the hot path
    // reads); acquire and release never take it.
    Mutex linkMutex_;

    MagazinePolicy* magazine_ = nullptr; // the policy, when it is ours: called directly
    const std::size_t maxBytes_ = classBytes(maxSizeClass(config_.tech));

    std::atomic<std::uint64_t> pooledTotal_{0}; // bytes, for the memory limit
    std::array<std::atomic<std::uint64_t>, kBufferKinds> pooledBytes_{};
    std::array<std::atomic<std::uint64_t>, kBufferKinds> descriptors_{};
    std::array<std::atomic<std::uint64_t>, kBufferKinds> freed_{};
    std::array<std::atomic<std::uint64_t>, kBufferKinds> reclaimed_{};
    std::array<std::atomic<std::uint64_t>, kBufferKinds> reclaimedBytes_{};
};

} // namespace smc
