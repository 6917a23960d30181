// SPDX-License-Identifier: MIT
// BufferPoolCore: making and freeing buffers under the memory limit; statistics and snapshots.
#include "pool/internal/pool_core.h"

namespace smc
{
namespace
{

std::atomic<std::uint64_t> nextPoolId{1};

std::unique_ptr<BucketPolicy> makePolicy(LockPolicy policy, const DescTable& table)
{
    switch (policy) {
    case LockPolicy::Global:
        return std::make_unique<LinuxListPolicy>(false);
    case LockPolicy::Bucket:
        return std::make_unique<LinuxListPolicy>(true);
    case LockPolicy::Default:
        break;
    }
    return std::make_unique<MagazinePolicy>(table);
}

} // namespace

BufferPoolCore::BufferPoolCore(const PoolConfig& config, Registrar& registrar)
    : config_(config), registrar_(registrar),
      allocator_(config.allocator ? *config.allocator : MmapAllocator::instance()),
      id_(nextPoolId.fetch_add(1, std::memory_order_relaxed)), table_(config.maxDescriptors),
      policy_(makePolicy(config.policy, table_))
{
    if (config.policy == LockPolicy::Default)
        magazine_ = static_cast<MagazinePolicy*>(policy_.get());
}

BufferPoolCore::~BufferPoolCore()
{
    // Nobody else can reach the pool any more: free every buffer.
    table_.forEach([this](BufferDesc& d) {
        if (DescAccess::live(d).load(std::memory_order_relaxed))
            destroy(d);
    });
}

Result<BufferDesc*> BufferPoolCore::create(ThreadState& t, BufferKind kind, unsigned cls,
                                           std::uint64_t& generation)
{
    const std::size_t bytes = classBytes(cls);
    if (config_.memoryLimit != 0) {
        const std::uint64_t before = pooledTotal_.fetch_add(bytes, std::memory_order_relaxed);
        if (before + bytes > config_.memoryLimit) {
            pooledTotal_.fetch_sub(bytes, std::memory_order_relaxed);
            return PoolErrc::LimitReached;
        }
    } else {
        pooledTotal_.fetch_add(bytes, std::memory_order_relaxed);
    }
    std::shared_ptr<std::byte> memory = allocator_.allocate(bytes);
    BufferDesc* d = memory ? table_.claim(t.descRun) : nullptr;
    if (d == nullptr) {
        pooledTotal_.fetch_sub(bytes, std::memory_order_relaxed);
        return memory ? PoolErrc::TableFull : PoolErrc::OutOfMemory;
    }

    DescAccess::assign(*d, owner_, kind, cls, std::move(memory));
    pooledBytes_[static_cast<unsigned>(kind)].fetch_add(bytes, std::memory_order_relaxed);
    descriptors_[static_cast<unsigned>(kind)].fetch_add(1, std::memory_order_relaxed);
    // Claimed from the start; the generation carries on from the slot's last
    // life so leases of that life stay invalid.
    auto& state = DescAccess::state(*d);
    generation = DescAccess::generationOf(state.load(std::memory_order_relaxed)) + 1;
    state.store(DescAccess::pack(generation, DescAccess::kUsed), std::memory_order_relaxed);
    DescAccess::live(*d).store(true, std::memory_order_seq_cst);
    policy_->insert(*d);

    // Register on every link that is or is becoming a target. A link being
    // added may already be registering this buffer (Busy): it will finish.
    enterRead(t);
    const unsigned mask = registrationMask();
    const unsigned done = usable_.load(std::memory_order_relaxed);
    std::error_code ec;
    for (unsigned link = 0; link < kMaxLinks && !ec; ++link)
        if (mask & linkBit(link))
            ec = registerOn(*d, link, config_.tech == Tech::SmcD || (done & linkBit(link)));
    exitRead(t);
    if (ec) {
        destroy(*d);
        return ec;
    }
    return d;
}

// Give a buffer's memory back and recycle its descriptor. The buffer is not
// free: nobody can claim it.
void BufferPoolCore::destroy(BufferDesc& d) noexcept
{
    policy_->remove(d);
    DescAccess::live(d).store(false, std::memory_order_seq_cst);
    for (unsigned link = 0; link < kMaxLinks; ++link)
        unregisterOn(d, link);
    const std::size_t bytes = d.size();
    const unsigned k = static_cast<unsigned>(d.kind());
    DescAccess::clear(d);
    pooledTotal_.fetch_sub(bytes, std::memory_order_relaxed);
    pooledBytes_[k].fetch_sub(bytes, std::memory_order_relaxed);
    descriptors_[k].fetch_sub(1, std::memory_order_relaxed);
    freed_[k].fetch_add(1, std::memory_order_relaxed);
    table_.vacate(d);
}

// Bytes leased right now, from the per-thread gauges (a snapshot under
// concurrency: a buffer being claimed may count as free).
std::uint64_t BufferPoolCore::leasedBytes() const noexcept
{
    std::int64_t sum = 0;
    for (ThreadState* t = registry_.load(std::memory_order_acquire); t != nullptr; t = t->next)
        for (const KindCounters& c : t->counters)
            sum += c.inUseBytes.load(std::memory_order_relaxed);
    return sum > 0 ? static_cast<std::uint64_t>(sum) : 0;
}

// Frees free buffers of any kind and class while more() holds, or until no free
// buffer is left. Every free buffer can be reclaimed wherever a hint to it sits
// (another thread's magazine, a free stack, a bucket list): as for reuse, the
// claim decides. A hint left behind is checked when popped.
template <typename More> std::size_t BufferPoolCore::reclaimWhile(More more) noexcept
{
    std::size_t freed = 0;
    table_.forEachUntil([&](BufferDesc& d) {
        if (!more())
            return true;
        std::uint64_t generation = 0;
        if (!DescAccess::live(d).load(std::memory_order_acquire) || !tryClaim(d, generation))
            return false;
        // Ours now: read it before destroy() clears it.
        const unsigned k = static_cast<unsigned>(d.kind());
        const std::size_t size = d.size();
        destroy(d); // unregisters it from every link, then frees it
        reclaimed_[k].fetch_add(1, std::memory_order_relaxed);
        reclaimedBytes_[k].fetch_add(size, std::memory_order_relaxed);
        ++freed;
        return false;
    });
    return freed;
}

// Until `bytes` more fit under the limit.
void BufferPoolCore::reclaim(std::size_t bytes) noexcept
{
    (void)reclaimWhile(
        [&] { return pooledTotal_.load(std::memory_order_relaxed) + bytes > config_.memoryLimit; });
}

// Free bytes are the pooled ones not leased (a snapshot: a buffer being claimed may count
// as free, and then the claim decides).
std::size_t BufferPoolCore::trim(std::size_t keepFreeBytes) noexcept
{
    MutexLocker lock(linkMutex_); // as reclaim: never beside a link change
    return reclaimWhile([&] {
        return pooledTotal_.load(std::memory_order_relaxed) > leasedBytes() + keepFreeBytes;
    });
}

std::vector<BufferDesc*> BufferPoolCore::buffers(BufferKind kind) const
{
    std::vector<BufferDesc*> out;
    table_.forEach([&](BufferDesc& d) {
        if (DescAccess::live(d).load(std::memory_order_acquire) && d.kind() == kind)
            out.push_back(&d);
    });
    return out;
}

PoolStats BufferPoolCore::stats() const noexcept
{
    PoolStats s;
    for (unsigned k = 0; k < kBufferKinds; ++k) {
        KindStats& out = k == 0 ? s.rmb : s.sndbuf;
        for (ThreadState* t = registry_.load(std::memory_order_acquire); t != nullptr;
             t = t->next) {
            const KindCounters& c = t->counters[k];
            out.allocs += c.allocs.load(std::memory_order_relaxed);
            out.reuses += c.reuses.load(std::memory_order_relaxed);
            out.downgrades += c.downgrades.load(std::memory_order_relaxed);
            out.failures += c.failures.load(std::memory_order_relaxed);
            out.releases += c.releases.load(std::memory_order_relaxed);
            out.inUseBytes += c.inUseBytes.load(std::memory_order_relaxed);
            for (unsigned cls = 0; cls < kSizeClasses; ++cls)
                out.classHistogram[cls] += c.classHistogram[cls].load(std::memory_order_relaxed);
        }
        out.freed = freed_[k].load(std::memory_order_relaxed);
        out.reclaimed = reclaimed_[k].load(std::memory_order_relaxed);
        out.reclaimedBytes = reclaimedBytes_[k].load(std::memory_order_relaxed);
        out.pooledBytes = pooledBytes_[k].load(std::memory_order_relaxed);
        out.descriptors = descriptors_[k].load(std::memory_order_relaxed);
    }
    return s;
}

} // namespace smc
