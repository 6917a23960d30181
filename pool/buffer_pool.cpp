// SPDX-License-Identifier: MIT
// BufferPool: acquire/release with downgrade, limits and statistics; link add/remove.
#include "pool/buffer_pool.h"

#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <tbb/enumerable_thread_specific.h>

#include "pool/internal/desc_access.h"
#include "pool/internal/desc_table.h"
#include "pool/internal/policies.h"
#include "pool/internal/thread_state.h"

namespace smc
{
namespace
{

using RegState = DescAccess::RegState;

std::atomic<std::uint64_t> nextPoolId{1};

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

constexpr unsigned bit(unsigned link) noexcept
{
    return 1u << link;
}

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

// The pool's machinery behind BufferPool's interface.
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
    BufferPoolCore(const PoolConfig& config, Registrar& registrar)
        : config_(config), registrar_(registrar),
          allocator_(config.allocator ? *config.allocator : MmapAllocator::instance()),
          table_(config.maxDescriptors), policy_(makePolicy(config.policy, table_))
    {
        if (config.policy == LockPolicy::Default)
            magazine_ = static_cast<MagazinePolicy*>(policy_.get());
    }

    ~BufferPoolCore()
    {
        // Nobody else can reach the pool any more: free every buffer.
        table_.forEach([this](BufferDesc& d) {
            if (DescAccess::live(d).load(std::memory_order_relaxed))
                destroy(d);
        });
    }

    void setOwner(BufferPool* owner) noexcept { owner_ = owner; }

    // The fast path: a free buffer of the requested class, registered where
    // it must be. Everything else is acquireSlow's.
    Result<BufferRef> acquire(BufferKind kind, std::size_t bytes)
    {
        ThreadState& t = local();
        std::uint64_t generation = 0;
        BufferDesc* d = nullptr;
        if (bytes - 1 < maxBytes_) [[likely]] {
            const unsigned cls = compressBufferSize(bytes, config_.tech);
            d = reuse(t, kind, cls, generation);
            if (d != nullptr &&
                (usable_.load(std::memory_order_acquire) == 0 || fullyRegistered(*d))) [[likely]] {
                KindCounters& counters = t.counters[static_cast<unsigned>(kind)];
                bump(counters.reuses);
                return lease(counters, *d, generation, false);
            }
        }
        return acquireSlow(t, kind, bytes, d, generation);
    }
    Result<BufferRef> acquireSlow(ThreadState& t, BufferKind kind, std::size_t bytes,
                                  BufferDesc* claimed, std::uint64_t generation);
    Result<void> release(BufferRef ref);
    Result<void> addLink(unsigned link);
    Result<void> removeLink(unsigned link);
    unsigned linkMask() const noexcept { return usable_.load(std::memory_order_acquire); }
    std::vector<BufferDesc*> buffers(BufferKind kind) const;
    PoolStats stats() const noexcept;
    const PoolConfig& config() const noexcept { return config_; }

private:
    ThreadState& local()
    {
        if (tlsPoolId == id_) [[likely]]
            return *tlsState;
        return localSlow();
    }
    ThreadState& localSlow();

    BufferRef lease(KindCounters& counters, BufferDesc& d, std::uint64_t generation,
                    bool downgraded) noexcept
    {
        if (downgraded)
            bump(counters.downgrades);
        bump(counters.classHistogram[d.sizeClass()]);
        bump(counters.inUseBytes, static_cast<std::int64_t>(d.size()));
        return DescAccess::makeRef(&d, generation);
    }

    // The hot path calls our own policy directly (it is final), the others
    // through the interface.
    BufferDesc* reuse(ThreadState& t, BufferKind kind, unsigned cls,
                      std::uint64_t& generation) noexcept
    {
        return magazine_ ? magazine_->reuse(t, kind, cls, generation)
                         : policy_->reuse(t, kind, cls, generation);
    }
    void putBack(ThreadState& t, BufferDesc& d, BufferKind kind, unsigned cls) noexcept
    {
        if (magazine_)
            magazine_->putBack(t, d, kind, cls);
        else
            policy_->putBack(t, d, kind, cls);
    }

    void enterRead(ThreadState& t) noexcept
    {
        t.readEpoch.store(epoch_.load(std::memory_order_seq_cst), std::memory_order_seq_cst);
    }
    void exitRead(ThreadState& t) noexcept { t.readEpoch.store(0, std::memory_order_release); }
    void synchronize() noexcept;

    unsigned registrationMask() const noexcept
    {
        if (config_.tech == Tech::SmcD)
            return bit(0); // the ISM device
        return usable_.load(std::memory_order_seq_cst) | adding_.load(std::memory_order_seq_cst);
    }

    BufferDesc* scavenge(BufferKind kind, unsigned cls, std::uint64_t& generation) noexcept;
    Result<BufferDesc*> create(ThreadState& t, BufferKind kind, unsigned cls,
                               std::uint64_t& generation);
    std::error_code registerOn(BufferDesc& d, unsigned link, bool wait) noexcept;
    void unregisterOn(BufferDesc& d, unsigned link) noexcept;
    bool fullyRegistered(const BufferDesc& d) const noexcept;
    std::error_code registerOnUsable(ThreadState& t, BufferDesc& d) noexcept;
    void destroy(BufferDesc& d) noexcept;
    void unregisterAll(unsigned link) noexcept;

    const PoolConfig config_;
    Registrar& registrar_;
    PageAllocator& allocator_;
    BufferPool* owner_ = nullptr;
    const std::uint64_t id_ = nextPoolId.fetch_add(1, std::memory_order_relaxed);

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
    std::mutex linkMutex_; // link changes only; acquire/release never take it

    MagazinePolicy* magazine_ = nullptr; // the policy, when it is ours: called directly
    const std::size_t maxBytes_ = classBytes(maxSizeClass(config_.tech));

    std::atomic<std::uint64_t> pooledTotal_{0}; // bytes, for the memory limit
    std::array<std::atomic<std::uint64_t>, kBufferKinds> pooledBytes_{};
    std::array<std::atomic<std::uint64_t>, kBufferKinds> descriptors_{};
    std::array<std::atomic<std::uint64_t>, kBufferKinds> freed_{};
};

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

void BufferPoolCore::synchronize() noexcept
{
    const std::uint64_t epoch = epoch_.fetch_add(1, std::memory_order_seq_cst) + 1;
    for (ThreadState* t = registry_.load(std::memory_order_acquire); t != nullptr; t = t->next) {
        for (;;) {
            const std::uint64_t seen = t->readEpoch.load(std::memory_order_seq_cst);
            if (seen == 0 || seen >= epoch)
                break;
            std::this_thread::yield();
        }
    }
}

std::error_code BufferPoolCore::registerOn(BufferDesc& d, unsigned link, bool wait) noexcept
{
    auto& state = DescAccess::regState(d, link);
    for (;;) {
        RegState s = state.load(std::memory_order_acquire);
        if (s == RegState::Registered)
            return {};
        if (s == RegState::Busy) {
            if (!wait)
                return {}; // a link change is registering it and will finish
            std::this_thread::yield();
            continue;
        }
        if (!state.compare_exchange_weak(s, RegState::Busy, std::memory_order_acquire))
            continue;
        std::error_code ec = registrar_.registerBuffer(d, link);
        state.store(ec ? RegState::Unregistered : RegState::Registered, std::memory_order_release);
        return ec;
    }
}

void BufferPoolCore::unregisterOn(BufferDesc& d, unsigned link) noexcept
{
    auto& state = DescAccess::regState(d, link);
    for (;;) {
        RegState s = state.load(std::memory_order_acquire);
        if (s == RegState::Unregistered)
            return;
        if (s == RegState::Busy) {
            std::this_thread::yield();
            continue;
        }
        if (!state.compare_exchange_weak(s, RegState::Busy, std::memory_order_acquire))
            continue;
        registrar_.unregisterBuffer(d, link);
        state.store(RegState::Unregistered, std::memory_order_release);
        return;
    }
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
    BufferDesc* d = memory ? table_.claim() : nullptr;
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
        if (mask & bit(link))
            ec = registerOn(*d, link, config_.tech == Tech::SmcD || (done & bit(link)));
    exitRead(t);
    if (ec) {
        destroy(*d);
        return ec;
    }
    return d;
}

bool BufferPoolCore::fullyRegistered(const BufferDesc& d) const noexcept
{
    const unsigned mask = usable_.load(std::memory_order_acquire);
    for (unsigned link = 0; link < kMaxLinks; ++link)
        if ((mask & bit(link)) && !d.isRegistered(link))
            return false;
    return true;
}

// Register a reused buffer on the usable links it misses (see acquire).
std::error_code BufferPoolCore::registerOnUsable(ThreadState& t, BufferDesc& d) noexcept
{
    enterRead(t);
    const unsigned now = usable_.load(std::memory_order_seq_cst);
    std::error_code ec;
    for (unsigned link = 0; link < kMaxLinks && !ec; ++link)
        if (now & bit(link))
            ec = registerOn(d, link, true);
    exitRead(t);
    return ec;
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

// The slow path of acquire: a bad size, a reused buffer that misses a
// registration (`claimed`), or no free buffer at the requested class.
Result<BufferRef> BufferPoolCore::acquireSlow(ThreadState& t, BufferKind kind, std::size_t bytes,
                                              BufferDesc* claimed, std::uint64_t generation)
{
    KindCounters& counters = t.counters[static_cast<unsigned>(kind)];
    if (bytes - 1 >= maxBytes_) { // 0 wraps around
        bump(counters.failures);
        return PoolErrc::InvalidSize;
    }
    const unsigned cls = compressBufferSize(bytes, config_.tech);

    // Like Linux: per class from the requested one down, reuse a free buffer,
    // else create one; only when that fails for want of memory, go smaller.
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
        } else {
            Result<BufferDesc*> created = create(t, kind, c, generation);
            if (created) {
                d = *created;
                bump(counters.allocs);
            } else {
                lastError = created.error();
                if (!isDowngradable(*lastError)) {
                    bump(counters.failures);
                    return *lastError;
                }
                // Out of memory: a free buffer of this class may be hinted
                // only in another thread's magazine. Find it before going smaller.
                if (magazine_ == nullptr || (d = scavenge(kind, c, generation)) == nullptr)
                    continue;
                bump(counters.reuses);
            }
        }
        return lease(counters, *d, generation, c != cls);
    }
    bump(counters.failures);
    return *lastError; // every class failed, each setting it
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

void BufferPoolCore::unregisterAll(unsigned link) noexcept
{
    table_.forEach([&](BufferDesc& d) { unregisterOn(d, link); });
}

Result<void> BufferPoolCore::addLink(unsigned link)
{
    if (config_.tech == Tech::SmcD)
        return PoolErrc::NotSupported;
    if (link >= kMaxLinks)
        return PoolErrc::InvalidLink;
    std::lock_guard lock(linkMutex_);
    if ((usable_.load() | adding_.load()) & bit(link))
        return PoolErrc::LinkExists;
    std::vector<BufferDesc*> claimed;
    claimed.reserve(config_.maxDescriptors); // no allocation once slots are Busy

    // From here on new buffers register on the link themselves; after
    // synchronize() no buffer is being registered under the old mask.
    adding_.fetch_or(bit(link), std::memory_order_seq_cst);
    synchronize();

    policy_->lockForLinkChange();
    table_.forEach([&](BufferDesc& d) {
        auto& state = DescAccess::regState(d, link);
        RegState expected = RegState::Unregistered;
        if (!state.compare_exchange_strong(expected, RegState::Busy, std::memory_order_seq_cst))
            return; // registered already, or its creator is at it
        if (!DescAccess::live(d).load(std::memory_order_seq_cst)) {
            state.store(RegState::Unregistered, std::memory_order_release);
            return;
        }
        claimed.push_back(&d);
    });
    std::error_code ec = registrar_.registerBuffers(claimed, link);
    for (BufferDesc* d : claimed)
        DescAccess::regState(*d, link).store(ec ? RegState::Unregistered : RegState::Registered,
                                             std::memory_order_release);
    // Buffers created meanwhile whose claim we skipped, or that a failed
    // creator left: make sure every live buffer ends up registered.
    table_.forEach([&](BufferDesc& d) {
        if (ec || !DescAccess::live(d).load(std::memory_order_acquire))
            return;
        ec = registerOn(d, link, true);
    });
    policy_->unlockForLinkChange();

    if (ec) {
        adding_.fetch_and(~bit(link), std::memory_order_seq_cst);
        synchronize();
        unregisterAll(link);
        return ec;
    }
    usable_.fetch_or(bit(link), std::memory_order_seq_cst);
    adding_.fetch_and(~bit(link), std::memory_order_seq_cst);
    return {};
}

Result<void> BufferPoolCore::removeLink(unsigned link)
{
    if (config_.tech == Tech::SmcD)
        return PoolErrc::NotSupported;
    if (link >= kMaxLinks)
        return PoolErrc::InvalidLink;
    std::lock_guard lock(linkMutex_);
    if (!(usable_.load() & bit(link)))
        return PoolErrc::NoSuchLink;
    usable_.fetch_and(~bit(link), std::memory_order_seq_cst);
    synchronize();
    policy_->lockForLinkChange();
    unregisterAll(link);
    policy_->unlockForLinkChange();
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
        out.pooledBytes = pooledBytes_[k].load(std::memory_order_relaxed);
        out.descriptors = descriptors_[k].load(std::memory_order_relaxed);
    }
    return s;
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
PoolStats BufferPool::stats() const noexcept
{
    return core_->stats();
}
const PoolConfig& BufferPool::config() const noexcept
{
    return core_->config();
}

} // namespace smc
