// SPDX-License-Identifier: MIT
// BufferPool: acquire/release with downgrade, limits and statistics; link add/remove.
#include "pool/buffer_pool.h"

#include <cstring>
#include <mutex>
#include <thread>

#include <tbb/enumerable_thread_specific.h>

#include "pool/internal/desc_access.h"
#include "pool/internal/desc_table.h"
#include "pool/internal/policies.h"
#include "pool/internal/thread_state.h"

namespace smc {
namespace {

using RegState = DescAccess::RegState;

std::atomic<std::uint64_t> nextPoolId{1};

bool isDowngradable(std::error_code ec) noexcept
{
    return ec == Errc::LimitReached || ec == Errc::OutOfMemory || ec == Errc::DmbLimitReached ||
           ec == std::errc::not_enough_memory || ec == std::errc::no_space_on_device;
}

constexpr unsigned bit(unsigned link) noexcept { return 1u << link; }

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

    Result<BufferRef> acquire(BufferKind kind, std::size_t bytes);
    std::error_code release(BufferRef ref);
    Result<void> addLink(unsigned link);
    Result<void> removeLink(unsigned link);
    unsigned linkMask() const noexcept { return usable_.load(std::memory_order_acquire); }
    void drainCaches() noexcept;
    std::vector<BufferDesc*> buffers(BufferKind kind) const;
    PoolStats stats() const noexcept;
    const PoolConfig& config() const noexcept { return config_; }

private:
    ThreadState& local();
    ThreadState& localSlow();

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

    Result<BufferDesc*> create(ThreadState& t, BufferKind kind, unsigned cls,
                               std::uint64_t& generation);
    std::error_code registerOn(BufferDesc& d, unsigned link, bool wait) noexcept;
    void unregisterOn(BufferDesc& d, unsigned link) noexcept;
    std::error_code ensureRegistered(ThreadState& t, BufferDesc& d) noexcept;
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
    // stats(), drainCaches() and synchronize() visit them all, even while
    // new threads join.
    tbb::enumerable_thread_specific<ThreadState> threads_;
    std::atomic<ThreadState*> registry_{nullptr};

    std::atomic<std::uint64_t> epoch_{1};
    std::atomic<unsigned> usable_{0};
    std::atomic<unsigned> adding_{0};
    std::mutex linkMutex_; // link changes only; acquire/release never take it

    std::atomic<std::uint64_t> pooledTotal_{0}; // bytes, for the memory limit
    std::array<std::atomic<std::uint64_t>, kBufferKinds> pooledBytes_{};
    std::array<std::atomic<std::uint64_t>, kBufferKinds> descriptors_{};
    std::array<std::atomic<std::uint64_t>, kBufferKinds> freed_{};
};

ThreadState& BufferPoolCore::local()
{
    // One-entry cache in front of TBB's lookup: threads mostly stay on one
    // link group. Pool ids are never reused, so a stale entry cannot match.
    thread_local std::uint64_t lastId = 0;
    thread_local ThreadState* lastState = nullptr;
    if (lastId == id_)
        return *lastState;
    ThreadState& t = localSlow();
    lastId = id_;
    lastState = &t;
    return t;
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
            return Errc::LimitReached;
        }
    } else {
        pooledTotal_.fetch_add(bytes, std::memory_order_relaxed);
    }
    std::shared_ptr<std::byte> memory = allocator_.allocate(bytes);
    BufferDesc* d = memory ? table_.claim() : nullptr;
    if (d == nullptr) {
        pooledTotal_.fetch_sub(bytes, std::memory_order_relaxed);
        return memory ? Errc::TableFull : Errc::OutOfMemory;
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

// A reused buffer must be registered on every usable link; normally it is,
// because a link becomes usable only after every buffer got registered on it.
std::error_code BufferPoolCore::ensureRegistered(ThreadState& t, BufferDesc& d) noexcept
{
    const unsigned mask = usable_.load(std::memory_order_acquire);
    bool complete = true;
    for (unsigned link = 0; link < kMaxLinks; ++link)
        if ((mask & bit(link)) && !d.isRegistered(link))
            complete = false;
    if (complete)
        return {};
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

Result<BufferRef> BufferPoolCore::acquire(BufferKind kind, std::size_t bytes)
{
    ThreadState& t = local();
    KindCounters& counters = t.counters[static_cast<unsigned>(kind)];
    Result<unsigned> cls = sizeClassFor(bytes, config_.tech);
    if (!cls) {
        bump(counters.failures);
        return cls.error();
    }

    std::error_code lastError;
    // Second round only under memory pressure: free buffers of the right
    // class may sit in other threads' caches.
    for (int round = 0; round < 2; ++round) {
        for (int c = static_cast<int>(*cls); c >= 0; --c) {
            std::uint64_t generation = 0;
            BufferDesc* d = policy_->reuse(t, kind, static_cast<unsigned>(c), generation);
            if (d != nullptr) {
                if (std::error_code ec = ensureRegistered(t, *d)) {
                    // A buffer the registrar refused is freed, never reused.
                    destroy(*d);
                    bump(counters.failures);
                    return ec;
                }
                bump(counters.reuses);
            } else {
                Result<BufferDesc*> created =
                    create(t, kind, static_cast<unsigned>(c), generation);
                if (!created) {
                    lastError = created.error();
                    if (!isDowngradable(lastError)) {
                        bump(counters.failures);
                        return lastError;
                    }
                    continue;
                }
                d = *created;
                bump(counters.allocs);
            }
            if (static_cast<unsigned>(c) != *cls)
                bump(counters.downgrades);
            bump(counters.classHistogram[static_cast<unsigned>(c)]);
            bump(counters.inUseBytes, static_cast<std::int64_t>(d->size()));
            return DescAccess::makeRef(d, generation);
        }
        if (config_.policy != LockPolicy::Default)
            break;
        drainCaches();
    }
    bump(counters.failures);
    return lastError;
}

std::error_code BufferPoolCore::release(BufferRef ref)
{
    BufferDesc* d = ref.desc();
    if (d == nullptr)
        return Errc::InvalidBuffer;
    if (DescAccess::pool(*d) != owner_)
        return Errc::ForeignBuffer;
    auto& state = DescAccess::state(*d);
    std::uint64_t expected = DescAccess::pack(ref.generation(), DescAccess::kUsed);
    // Used -> Releasing first: nobody can claim the buffer while we scrub it,
    // and a stale or second release fails here without touching it.
    if (!state.compare_exchange_strong(expected,
                                       DescAccess::pack(ref.generation(), DescAccess::kReleasing),
                                       std::memory_order_acquire, std::memory_order_relaxed))
        return Errc::DoubleRelease;

    ThreadState& t = local();
    KindCounters& counters = t.counters[static_cast<unsigned>(d->kind())];
    if (config_.zeroOnRelease)
        std::memset(d->data(), 0, d->size());
    bump(counters.releases);
    bump(counters.inUseBytes, -static_cast<std::int64_t>(d->size()));
    state.store(DescAccess::pack(ref.generation(), DescAccess::kFree), std::memory_order_release);
    policy_->putBack(t, *d);
    return {};
}

void BufferPoolCore::unregisterAll(unsigned link) noexcept
{
    table_.forEach([&](BufferDesc& d) { unregisterOn(d, link); });
}

Result<void> BufferPoolCore::addLink(unsigned link)
{
    if (config_.tech == Tech::SmcD)
        return Errc::NotSupported;
    if (link >= kMaxLinks)
        return Errc::InvalidLink;
    std::lock_guard lock(linkMutex_);
    if ((usable_.load() | adding_.load()) & bit(link))
        return Errc::LinkExists;
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
        return Errc::NotSupported;
    if (link >= kMaxLinks)
        return Errc::InvalidLink;
    std::lock_guard lock(linkMutex_);
    if (!(usable_.load() & bit(link)))
        return Errc::NoSuchLink;
    usable_.fetch_and(~bit(link), std::memory_order_seq_cst);
    synchronize();
    policy_->lockForLinkChange();
    unregisterAll(link);
    policy_->unlockForLinkChange();
    return {};
}

void BufferPoolCore::drainCaches() noexcept
{
    for (ThreadState* t = registry_.load(std::memory_order_acquire); t != nullptr; t = t->next)
        policy_->drain(*t);
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
        return Errc::OutOfMemory;
    }
}

BufferPool::BufferPool(std::unique_ptr<BufferPoolCore> core) : core_(std::move(core)) {}
BufferPool::~BufferPool() = default;

Result<BufferRef> BufferPool::acquire(BufferKind kind, std::size_t bytes) noexcept
{
    try {
        return core_->acquire(kind, bytes);
    } catch (const std::bad_alloc&) {
        return Errc::OutOfMemory;
    }
}

std::error_code BufferPool::release(BufferRef buffer) noexcept
{
    try {
        return core_->release(buffer);
    } catch (const std::bad_alloc&) {
        // Only the first call from a new thread allocates (its ThreadState).
        return Errc::OutOfMemory;
    }
}

Result<void> BufferPool::addLink(unsigned link)
{
    try {
        return core_->addLink(link);
    } catch (const std::bad_alloc&) {
        return Errc::OutOfMemory;
    }
}

Result<void> BufferPool::removeLink(unsigned link) { return core_->removeLink(link); }
unsigned BufferPool::linkMask() const noexcept { return core_->linkMask(); }
void BufferPool::drainCaches() noexcept { core_->drainCaches(); }
std::vector<BufferDesc*> BufferPool::buffers(BufferKind kind) const
{
    return core_->buffers(kind);
}
PoolStats BufferPool::stats() const noexcept { return core_->stats(); }
const PoolConfig& BufferPool::config() const noexcept { return core_->config(); }

} // namespace smc
