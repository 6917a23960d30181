// SPDX-License-Identifier: MIT
// BufferPool: per-link-group RMB and sndbuf pool, bucketed by size class, with three lock policies.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "base/result.h"
#include "pool/buffer_desc.h"
#include "pool/errors.h"
#include "pool/lock_policy.h"
#include "pool/page_allocator.h"
#include "pool/registrar.h"
#include "pool/size_class.h"
#include "pool/stats.h"

namespace smc
{

struct PoolConfig {
    Tech tech = Tech::SmcR;
    LockPolicy policy = LockPolicy::Default;
    // Bytes the pool may own in all (leased and free buffers); 0 = no limit.
    // Free buffers do not block others: a new buffer that would exceed it
    // first gets room by reclaiming free buffers of other kinds and classes
    // (unregistered from every link, freed; PoolStats' `reclaimed`), wherever
    // they are cached, even in another thread's cache. Only a class that
    // cannot fit beside the leased bytes downgrades, as if the allocator had
    // failed; LimitReached when no class fits. That holds exactly for one
    // thread; with several, another thread may take the room a reclaim made
    // (then LimitReached). Reclaim runs on the slow path only. Memory that a
    // device or peer still holds after the pool freed a buffer (an attached
    // DMB, a write in flight) is not counted.
    std::size_t memoryLimit = 0;
    // Scrub a buffer on release, as Linux does. Off by default: SMC's cursors
    // never expose stale bytes, and a scrub of a 1 MiB buffer costs far more
    // than the pool operation it follows.
    bool zeroOnRelease = false;
    // Where memory comes from; null = MmapAllocator::instance(). Borrowed.
    PageAllocator* allocator = nullptr;
    // Upper bound on descriptors (buffers) the pool may hold, at most 65536.
    unsigned maxDescriptors = 65536;
};

class BufferPoolCore;

// One link group's pool. acquire() and release() may be called from any
// number of threads; addLink()/removeLink() (SMC-R) may run concurrently with
// them.
//
// Lifetimes (nothing here is checked; breaking them is undefined behaviour):
// * The registrar and PoolConfig::allocator are borrowed and must outlive the
//   pool: its destructor unregisters and frees every buffer through them.
// * The pool must outlive every call on it. Destroying it while another
//   thread is inside acquire, release, addLink, removeLink, buffers or stats
//   is a use-after-free.
// * The destructor frees every buffer, leased or not, and the descriptors.
//   Every BufferRef and BufferDesc* it handed out then dangles: releasing
//   one, or reading its data, size or registrations, is a use-after-free
//   (release() cannot refuse it: the descriptor it would check is gone).
//   Release every lease first; stats() shows inUseBytes == 0 when done.
// * Bytes needed beyond the pool can be kept by copying BufferDesc::memory()
//   while the lease is held: the memory then lives on, its registrations
//   (lkeys, rkeys, DMB tokens) do not.
class BufferPool
{
public:
    // Errors: std::errc::invalid_argument (maxDescriptors 0 or above 65536),
    // PoolErrc::OutOfMemory. Does not block.
    static Result<std::unique_ptr<BufferPool>> create(const PoolConfig& config,
                                                      Registrar& registrar);
    // No other call may be in progress; see "Lifetimes" above.
    ~BufferPool();
    BufferPool(const BufferPool&) = delete;
    BufferPool& operator=(const BufferPool&) = delete;

    // Reuse a free buffer of the class that holds `bytes`, else create and
    // register one (under the memory limit, after reclaiming free buffers of
    // other buckets), else downgrade to smaller classes, else a clear error.
    // Errors: PoolErrc::InvalidKind, InvalidSize, LimitReached, OutOfMemory,
    // TableFull, or the registrar's own error. A reuse takes no lock with the
    // default policy and a read lock with the others (waiting out a link
    // change there); creating or reclaiming a buffer calls the registrar,
    // which may block (an RDMA memory registration).
    Result<BufferRef> acquire(BufferKind kind, std::size_t bytes) noexcept;
    // Give a buffer back for reuse. Refuses a double release, a stale lease
    // and a buffer of another pool, without touching the buffer. Errors:
    // PoolErrc::InvalidBuffer, ForeignBuffer, DoubleRelease, OutOfMemory (the
    // first call from a new thread only). Never blocks.
    Result<void> release(BufferRef buffer) noexcept;

    // SMC-R: make link `link` (0..2) a registration target: every buffer the
    // pool holds is registered on it (in bulk) while acquire/release go on.
    // Errors: PoolErrc::NotSupported (SMC-D), InvalidLink, LinkExists,
    // OutOfMemory, or the registrar's error (then nothing is left registered
    // on the link). Blocks: waits for registrations under way and for the
    // registrar; serialised with other link changes.
    Result<void> addLink(unsigned link);
    // SMC-R: unregister every buffer from `link` and stop registering on it.
    // Errors: PoolErrc::NotSupported, InvalidLink, NoSuchLink. Blocks like
    // addLink.
    Result<void> removeLink(unsigned link);
    // Links whose registration is complete (bit i = link i).
    unsigned linkMask() const noexcept;

    // Every buffer the pool holds, leased or free (a snapshot; SMC-R rkey
    // exchange uses it). Call while no link is being removed. Under a memory
    // limit a free buffer in it may be reclaimed (freed) at any time; only
    // the leased ones stay valid. Empty for an unknown kind. Does not block.
    std::vector<BufferDesc*> buffers(BufferKind kind) const;

    // Frees free buffers (unregistered from every link, freed; counted as `reclaimed`) until
    // at most `keepFreeBytes` of free buffers are left; how many it freed. For a pool whose
    // buffers are kept after a burst that will not come again. A freed buffer's descriptor
    // may be in a buffers() snapshot: do not trim an SMC-R pool while one is in use. Waits
    // for a link change in progress.
    std::size_t trim(std::size_t keepFreeBytes) noexcept;

    // The per-thread counters summed (a snapshot while others run). Does not block.
    PoolStats stats() const noexcept;
    const PoolConfig& config() const noexcept;

private:
    explicit BufferPool(std::unique_ptr<BufferPoolCore> core);
    std::unique_ptr<BufferPoolCore> core_;
};

} // namespace smc
