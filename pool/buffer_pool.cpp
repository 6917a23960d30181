// SPDX-License-Identifier: MIT
// BufferPool: the public face, and the hot path: acquire (with downgrade) and release.
#include "pool/buffer_pool.h"

#include <cstring>
#include <optional>

#include "pool/internal/pool_core.h"

namespace smc
{
namespace
{

// One-entry cache in front of TBB's lookup: threads mostly stay on one link
// group. Pool ids are never reused, so a stale entry cannot match.
// initial-exec: a plain %fs-relative access instead of __tls_get_addr.
[[gnu::tls_model("initial-exec")]] thread_local std::uint64_t tlsPoolId = 0;
[[gnu::tls_model("initial-exec")]] thread_local ThreadState* tlsState = nullptr;

bool isDowngradable(std::error_code ec) noexcept
{
    return ec == PoolErrc::LimitReached || ec == PoolErrc::OutOfMemory ||
           ec == std::errc::not_enough_memory || ec == std::errc::no_space_on_device;
}

} // namespace

// The hot path's helpers are declared inline and defined only here, their
// only caller: every call compiles to straight-line code, as when they sat
// in the class body.
inline ThreadState& BufferPoolCore::local()
{
    if (tlsPoolId == id_) [[likely]]
        return *tlsState;
    return localSlow();
}

ThreadState& BufferPoolCore::localSlow()
{
    bool exists = false;
    ThreadState& t = threads_.local(exists);
    if (!exists) {
        ThreadState* head = registry_.load(std::memory_order_relaxed);
        do {
            t.next = head;
        } while (!registry_.compare_exchange_weak(head, &t, std::memory_order_release,
                                                  std::memory_order_relaxed));
    }
    tlsPoolId = id_;
    tlsState = &t;
    return t;
}

inline BufferRef BufferPoolCore::lease(KindCounters& counters, BufferDesc& d,
                                       std::uint64_t generation, bool downgraded) noexcept
{
    if (downgraded)
        bump(counters.downgrades);
    bump(counters.classHistogram[d.sizeClass()]);
    bump(counters.inUseBytes, static_cast<std::int64_t>(d.size()));
    return DescAccess::makeRef(&d, generation);
}

// The hot path calls our own policy directly (it is final), the others
// through the interface.
inline BufferDesc* BufferPoolCore::reuse(ThreadState& t, BufferKind kind, unsigned cls,
                                         std::uint64_t& generation) noexcept
{
    return magazine_ ? magazine_->reuse(t, kind, cls, generation)
                     : policy_->reuse(t, kind, cls, generation);
}

inline void BufferPoolCore::putBack(ThreadState& t, BufferDesc& d, BufferKind kind,
                                    unsigned cls) noexcept
{
    if (magazine_)
        magazine_->putBack(t, d, kind, cls);
    else
        policy_->putBack(t, d, kind, cls);
}

// The fast path: a free buffer of the requested class, registered where
// it must be. Everything else is acquireSlow's.
inline Result<BufferRef> BufferPoolCore::acquire(BufferKind kind, std::size_t bytes)
{
    ThreadState& t = local();
    std::uint64_t generation = 0;
    BufferDesc* d = nullptr;
    if (bytes - 1 < maxBytes_ && static_cast<unsigned>(kind) < kBufferKinds) [[likely]] {
        const unsigned cls = compressBufferSize(bytes, config_.tech);
        d = reuse(t, kind, cls, generation);
        if (d != nullptr && (usable_.load(std::memory_order_acquire) == 0 || fullyRegistered(*d)))
            [[likely]] {
            KindCounters& counters = t.counters[static_cast<unsigned>(kind)];
            bump(counters.reuses);
            return lease(counters, *d, generation, false);
        }
    }
    return acquireSlow(t, kind, bytes, d, generation);
}

// The slow path of acquire: a bad kind or size, a reused buffer that misses a
// registration (`claimed`), or no free buffer at the requested class.
Result<BufferRef> BufferPoolCore::acquireSlow(ThreadState& t, BufferKind kind, std::size_t bytes,
                                              BufferDesc* claimed, std::uint64_t generation)
{
    if (static_cast<unsigned>(kind) >= kBufferKinds)
        return PoolErrc::InvalidKind; // counted nowhere: there is no such kind
    KindCounters& counters = t.counters[static_cast<unsigned>(kind)];
    if (bytes - 1 >= maxBytes_) { // 0 wraps around
        bump(counters.failures);
        return PoolErrc::InvalidSize;
    }
    const unsigned cls = compressBufferSize(bytes, config_.tech);

    // Like Linux: per class from the requested one down, reuse a free buffer,
    // else create one; only when that fails for want of memory, go smaller.
    // Under the memory limit, free buffers of other buckets are memory to be
    // had: they are reclaimed for this class before it counts as failed.
    std::optional<std::error_code> lastError;
    for (unsigned c = cls + 1; c-- > 0;) {
        BufferDesc* d = c == cls ? claimed : reuse(t, kind, c, generation);
        if (d != nullptr) {
            // A link is usable only once every buffer is registered on it, so
            // this is the rare race with a link being added.
            if (!fullyRegistered(*d)) {
                if (std::error_code ec = registerOnUsable(t, *d)) {
                    // A buffer the registrar refused is freed, never reused.
                    destroy(*d);
                    bump(counters.failures);
                    return ec;
                }
            }
            bump(counters.reuses);
            return lease(counters, *d, generation, c != cls);
        }
        Result<BufferDesc*> created = create(t, kind, c, generation);
        // Out of memory: a free buffer of this class may be hinted only in
        // another thread's magazine. Find it before anything costlier.
        if (!created && isDowngradable(created.error()) && magazine_ != nullptr &&
            (d = scavenge(kind, c, generation)) != nullptr) {
            bump(counters.reuses);
            return lease(counters, *d, generation, c != cls);
        }
        if (!created && created.error() == PoolErrc::LimitReached)
            created = createAfterReclaim(t, kind, c, generation);
        if (!created) {
            lastError = created.error();
            if (!isDowngradable(*lastError)) {
                bump(counters.failures);
                return *lastError;
            }
            continue;
        }
        bump(counters.allocs);
        return lease(counters, **created, generation, c != cls);
    }
    bump(counters.failures);
    return *lastError; // every class failed, each setting it
}

// The limit refused a buffer of class `cls`: if it fits beside what is
// leased, free enough free buffers of other buckets (reclaim) and create it.
// If it cannot fit whatever is freed, nothing is reclaimed in vain. Under
// concurrency `leasedBytes()` is a snapshot, and another thread may take the
// room made here: then LimitReached, as when there was none.
Result<BufferDesc*> BufferPoolCore::createAfterReclaim(ThreadState& t, BufferKind kind,
                                                       unsigned cls, std::uint64_t& generation)
{
    if (leasedBytes() + classBytes(cls) > config_.memoryLimit)
        return PoolErrc::LimitReached;
    // Not beside a link change: addLink/removeLink walk every live buffer
    // (registering, unregistering) and must not meet one being freed. Never
    // wait for one either (it waits for readers like us): no room this time.
    if (!linkMutex_.tryLock())
        return PoolErrc::LimitReached;
    reclaim(classBytes(cls));
    linkMutex_.unlock();
    return create(t, kind, cls, generation);
}

Result<void> BufferPoolCore::release(BufferRef ref)
{
    BufferDesc* d = ref.desc();
    if (d == nullptr)
        return PoolErrc::InvalidBuffer;
    if (DescAccess::pool(*d) != owner_)
        return PoolErrc::ForeignBuffer;
    // Only the holder of the current lease may release, so a load and a
    // store suffice (no locked instruction): a second or stale release sees
    // another state and fails without touching the buffer. Even two threads
    // racing to release one lease cannot corrupt anything: reuse goes through
    // the claim CAS, so the buffer is still handed out once.
    auto& state = DescAccess::state(*d);
    if (state.load(std::memory_order_acquire) !=
        DescAccess::pack(ref.generation(), DescAccess::kUsed))
        return PoolErrc::DoubleRelease;
    // Read what putBack needs while the buffer is still ours: once it is
    // Free, another thread may claim it (and even free it).
    const BufferKind kind = d->kind();
    const unsigned cls = d->sizeClass();
    const std::size_t size = d->size();
    if (config_.zeroOnRelease)
        std::memset(d->data(), 0, size); // still Used: nobody can claim it yet
    ThreadState& t = local();
    KindCounters& counters = t.counters[static_cast<unsigned>(kind)];
    bump(counters.releases);
    bump(counters.inUseBytes, -static_cast<std::int64_t>(size));
    state.store(DescAccess::pack(ref.generation(), DescAccess::kFree), std::memory_order_release);
    putBack(t, *d, kind, cls);
    return {};
}

BufferDesc* BufferPoolCore::scavenge(BufferKind kind, unsigned cls,
                                     std::uint64_t& generation) noexcept
{
    BufferDesc* found = nullptr;
    table_.forEach([&](BufferDesc& d) {
        // Kind and class are stable while the buffer is Free; the claim then
        // makes them ours to trust (as in MagazinePolicy::claimAs).
        if (found == nullptr && DescAccess::live(d).load(std::memory_order_acquire) &&
            tryClaim(d, generation)) {
            if (d.kind() == kind && d.sizeClass() == cls)
                found = &d;
            else
                DescAccess::state(d).store(DescAccess::pack(generation, DescAccess::kFree),
                                           std::memory_order_release);
        }
    });
    return found;
}

// --- BufferPool: the public face -------------------------------------------

Result<std::unique_ptr<BufferPool>> BufferPool::create(const PoolConfig& config,
                                                       Registrar& registrar)
{
    if (config.maxDescriptors == 0 || config.maxDescriptors > DescTable::kMaxCapacity)
        return std::make_error_code(std::errc::invalid_argument);
    try {
        std::unique_ptr<BufferPool> pool(
            new BufferPool(std::make_unique<BufferPoolCore>(config, registrar)));
        pool->core_->setOwner(pool.get());
        return pool;
    } catch (const std::bad_alloc&) {
        return PoolErrc::OutOfMemory;
    }
}

BufferPool::BufferPool(std::unique_ptr<BufferPoolCore> core) : core_(std::move(core)) {}
BufferPool::~BufferPool() = default;

Result<BufferRef> BufferPool::acquire(BufferKind kind, std::size_t bytes) noexcept
{
    try {
        return core_->acquire(kind, bytes);
    } catch (const std::bad_alloc&) {
        return PoolErrc::OutOfMemory;
    }
}

Result<void> BufferPool::release(BufferRef buffer) noexcept
{
    try {
        return core_->release(buffer);
    } catch (const std::bad_alloc&) {
        // Only the first call from a new thread allocates (its ThreadState).
        return PoolErrc::OutOfMemory;
    }
}

Result<void> BufferPool::addLink(unsigned link)
{
    try {
        return core_->addLink(link);
    } catch (const std::bad_alloc&) {
        return PoolErrc::OutOfMemory;
    }
}

Result<void> BufferPool::removeLink(unsigned link)
{
    return core_->removeLink(link);
}
unsigned BufferPool::linkMask() const noexcept
{
    return core_->linkMask();
}
std::vector<BufferDesc*> BufferPool::buffers(BufferKind kind) const
{
    return core_->buffers(kind);
}
std::size_t BufferPool::trim(std::size_t keepFreeBytes) noexcept
{
    return core_->trim(keepFreeBytes);
}
PoolStats BufferPool::stats() const noexcept
{
    return core_->stats();
}
const PoolConfig& BufferPool::config() const noexcept
{
    return core_->config();
}

} // namespace smc
