// SPDX-License-Identifier: MIT
// Concurrency stress: many threads, mixed sizes, links coming and going; run under TSan in CI.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pool/buffer_pool.h"
#include "smc/ism/ism_registrar.h"
#include "smc/ism/loopback_ism.h"
#include "tests/libtest/fakes.h"
#include "tests/libtest/policies.h"

namespace smc
{
namespace
{

template <typename Tag> class StressTest : public ::testing::Test
{
};
TYPED_TEST_SUITE(StressTest, test::Policies, test::PolicyName);

constexpr int kThreads = 8;
constexpr int kIterations = 20000;
constexpr std::size_t kSizes[] = {16384, 32768, 65536, 131072};

// Each holder stamps its id into the first bytes of every buffer it holds and
// checks the stamp is still there before release: a buffer handed to two
// owners at once is caught by whichever looks second.
struct Stamp {
    std::uint64_t owner;
    std::uint64_t serial;
};

// Ends the test binary with a failure if the test that made it runs past
// `limit`: a hung thread cannot be unwound, and the run must not hang.
class Watchdog
{
public:
    explicit Watchdog(std::chrono::seconds limit)
        : thread_([this, limit] {
              std::unique_lock lock(mutex_);
              if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
                  std::fprintf(stderr, "watchdog: %s hung\n",
                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
                  std::_Exit(1);
              }
          })
    {
    }
    ~Watchdog()
    {
        {
            std::lock_guard lock(mutex_);
            done_ = true;
        }
        cv_.notify_one();
        thread_.join();
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
};

bool stampFree(const BufferRef& b)
{
    Stamp s;
    std::memcpy(&s, b.data(), sizeof s);
    return s.owner == 0;
}

void stamp(const BufferRef& b, std::uint64_t owner, std::uint64_t serial)
{
    const Stamp s{owner, serial};
    std::memcpy(b.data(), &s, sizeof s);
}

bool stampIs(const BufferRef& b, std::uint64_t owner, std::uint64_t serial)
{
    Stamp s;
    std::memcpy(&s, b.data(), sizeof s);
    return s.owner == owner && s.serial == serial;
}

// A worker's buffers with the serial each was stamped with.
using Held = std::vector<std::pair<BufferRef, std::uint64_t>>;

// The worker is done: every buffer it still holds goes back, unstamped.
// Returns how many releases failed.
int releaseAll(BufferPool& pool, Held& held)
{
    int failed = 0;
    for (auto& [ref, serial] : held) {
        stamp(ref, 0, 0);
        if (!pool.release(ref))
            ++failed;
    }
    held.clear();
    return failed;
}

// What a worker or the link churn saw go wrong, one count per kind so a
// failure says which.
struct Errors {
    std::atomic<int> acquire{0};      // acquire() failed
    std::atomic<int> twoOwners{0};    // a buffer handed out still stamped, or restamped while held
    std::atomic<int> unregistered{0}; // held while a link stayed usable, yet not registered on it
    std::atomic<int> release{0};      // release() failed
    std::atomic<int> linkChange{0};   // addLink() or removeLink() failed
};

TYPED_TEST(StressTest, NoBufferHasTwoOwnersWhileLinksChange)
{
    test::FakeRegistrar registrar;
    PoolConfig config;
    config.policy = TypeParam::kPolicy;
    auto pool = std::move(BufferPool::create(config, registrar)).value();
    ASSERT_TRUE(pool->addLink(0));

    // Odd while the churn is removing a link: a worker that saw the same even
    // count before and after its check knows no link went away meanwhile, so
    // a link usable at the start stayed usable (a link removed and added back
    // between two reads of the mask would look usable throughout).
    std::atomic<std::uint64_t> removals{0};
    Errors errors;
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int id = 1; id <= kThreads; ++id) {
        workers.emplace_back([&, id] {
            std::mt19937 rng(static_cast<unsigned>(id));
            Held held;
            for (std::uint64_t i = 0; i < kIterations; ++i) {
                const BufferKind kind = (rng() & 1) ? BufferKind::Rmb : BufferKind::Sndbuf;
                Result<BufferRef> b = pool->acquire(kind, kSizes[rng() % 4]);
                if (!b) {
                    ++errors.acquire;
                    continue;
                }
                if (!stampFree(*b)) {
                    ++errors.twoOwners;
                    continue;
                }
                stamp(*b, static_cast<std::uint64_t>(id), i);
                // A buffer registered on every usable link, whatever is changing.
                const std::uint64_t before = removals.load();
                const unsigned mask = pool->linkMask();
                unsigned missing = 0;
                for (unsigned l = 0; l < kMaxLinks; ++l)
                    if ((mask & (1u << l)) && !(*b)->isRegistered(l))
                        missing |= 1u << l;
                if (missing != 0 && before % 2 == 0 && removals.load() == before)
                    ++errors.unregistered;
                held.emplace_back(*b, i);
                // Hold up to 4 buffers, release in random order.
                while (held.size() > (rng() % 4)) {
                    const std::size_t k = rng() % held.size();
                    auto [ref, serial] = held[k];
                    held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
                    if (!stampIs(ref, static_cast<std::uint64_t>(id), serial))
                        ++errors.twoOwners;
                    stamp(ref, 0, 0);
                    if (!pool->release(ref))
                        ++errors.release;
                }
            }
            errors.release += releaseAll(*pool, held);
        });
    }
    // Link churn: add and remove link 1 and 2 while buffers move.
    std::thread churn([&] {
        while (!stop.load()) {
            for (unsigned link : {1u, 2u}) {
                if (!pool->addLink(link))
                    ++errors.linkChange;
                std::this_thread::yield();
                ++removals;
                if (!pool->removeLink(link))
                    ++errors.linkChange;
                ++removals;
            }
        }
    });
    for (auto& w : workers)
        w.join();
    stop = true;
    churn.join();

    EXPECT_EQ(errors.acquire.load(), 0);
    EXPECT_EQ(errors.twoOwners.load(), 0);
    EXPECT_EQ(errors.unregistered.load(), 0);
    EXPECT_EQ(errors.release.load(), 0);
    EXPECT_EQ(errors.linkChange.load(), 0);
    EXPECT_EQ(registrar.violations(), 0) << "a buffer registered or unregistered twice";
    EXPECT_EQ(pool->linkMask(), 1u);
    // Exactly the pool's buffers are registered, on link 0 only.
    const PoolStats s = pool->stats();
    EXPECT_EQ(registrar.liveOn(0), s.rmb.descriptors + s.sndbuf.descriptors);
    EXPECT_EQ(registrar.liveOn(1) + registrar.liveOn(2), 0u);
    EXPECT_EQ(s.rmb.inUseBytes + s.sndbuf.inUseBytes, 0);
    EXPECT_EQ(s.rmb.allocs + s.rmb.reuses + s.sndbuf.allocs + s.sndbuf.reuses,
              std::uint64_t{kThreads} * kIterations);
    EXPECT_EQ(s.rmb.releases + s.sndbuf.releases, std::uint64_t{kThreads} * kIterations);
    pool.reset();
    EXPECT_EQ(registrar.liveCount(), 0u);
}

TYPED_TEST(StressTest, LimitedPoolNeverOvershootsAndNeverLeaks)
{
    test::FakeRegistrar registrar;
    test::CountingAllocator allocator;
    PoolConfig config;
    config.policy = TypeParam::kPolicy;
    config.memoryLimit = 2 << 20;
    config.allocator = &allocator;
    auto pool = std::move(BufferPool::create(config, registrar)).value();
    std::atomic<std::size_t> peak{0};
    std::vector<std::thread> workers;
    for (int id = 0; id < kThreads; ++id) {
        workers.emplace_back([&, id] {
            std::mt19937 rng(static_cast<unsigned>(id));
            for (int i = 0; i < kIterations / 3; ++i) {
                Result<BufferRef> b = pool->acquire(BufferKind::Rmb, kSizes[rng() % 4] * 2);
                std::size_t live = allocator.live.load();
                std::size_t seen = peak.load();
                while (live > seen && !peak.compare_exchange_weak(seen, live)) {
                }
                if (b)
                    EXPECT_TRUE(pool->release(*b));
                else
                    EXPECT_EQ(b.error(), PoolErrc::LimitReached);
            }
        });
    }
    for (auto& w : workers)
        w.join();
    EXPECT_LE(peak.load(), config.memoryLimit);
    pool.reset();
    EXPECT_EQ(allocator.live.load(), 0u);
}

// Under a tight limit, threads take each other's free buffers of other
// kinds and classes (reclaim) while links come and go: no buffer is freed
// while leased or registered twice, the limit holds, nothing leaks.
TYPED_TEST(StressTest, ReclaimAcrossKindsUnderALimitKeepsTheBooks)
{
    test::FakeRegistrar registrar;
    test::CountingAllocator allocator;
    PoolConfig config;
    config.policy = TypeParam::kPolicy;
    config.memoryLimit = 1 << 20;
    config.allocator = &allocator;
    auto pool = std::move(BufferPool::create(config, registrar)).value();
    ASSERT_TRUE(pool->addLink(0));
    // The limit full of free 128 KiB sndbufs: whatever the schedule, the
    // workers' first buffers of any other bucket must come from a reclaim.
    std::vector<BufferRef> fill;
    for (Result<BufferRef> b = pool->acquire(BufferKind::Sndbuf, kSizes[3]); b;
         b = pool->acquire(BufferKind::Sndbuf, kSizes[3]))
        fill.push_back(*b);
    ASSERT_EQ(fill.size() * kSizes[3], config.memoryLimit);
    for (BufferRef ref : fill)
        ASSERT_TRUE(pool->release(ref));
    std::atomic<std::size_t> peak{0};
    std::atomic<int> errors{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int id = 1; id <= kThreads; ++id) {
        workers.emplace_back([&, id] {
            std::mt19937 rng(static_cast<unsigned>(id));
            Held held;
            for (std::uint64_t i = 0; i < kIterations / 10; ++i) {
                const BufferKind kind = (rng() & 1) ? BufferKind::Rmb : BufferKind::Sndbuf;
                Result<BufferRef> b = pool->acquire(kind, kSizes[rng() % 4]);
                std::size_t live = allocator.live.load();
                std::size_t seen = peak.load();
                while (live > seen && !peak.compare_exchange_weak(seen, live)) {
                }
                if (!b) {
                    if (b.error() != PoolErrc::LimitReached)
                        ++errors;
                } else if (!stampFree(*b) || !(*b)->isRegistered(0)) {
                    ++errors;
                } else {
                    stamp(*b, static_cast<std::uint64_t>(id), i);
                    held.emplace_back(*b, i);
                }
                while (held.size() > (rng() % 3)) {
                    auto [ref, serial] = held.back();
                    held.pop_back();
                    if (!stampIs(ref, static_cast<std::uint64_t>(id), serial))
                        ++errors;
                    stamp(ref, 0, 0);
                    if (!pool->release(ref))
                        ++errors;
                }
            }
            errors += releaseAll(*pool, held);
        });
    }
    std::thread churn([&] {
        // Pauses between changes: reclaim steps aside while a link changes,
        // and back-to-back changes would leave it no turn.
        while (!stop.load()) {
            if (!pool->addLink(1))
                ++errors;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            if (!pool->removeLink(1))
                ++errors;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    });
    for (auto& w : workers)
        w.join();
    stop = true;
    churn.join();

    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(registrar.violations(), 0);
    EXPECT_LE(peak.load(), config.memoryLimit);
    const PoolStats s = pool->stats();
    EXPECT_GT(s.rmb.reclaimed + s.sndbuf.reclaimed, 0u) << "the limit never made anyone reclaim";
    EXPECT_EQ(registrar.liveOn(0), s.rmb.descriptors + s.sndbuf.descriptors);
    EXPECT_EQ(registrar.liveOn(1), 0u);
    EXPECT_EQ(s.rmb.pooledBytes + s.sndbuf.pooledBytes, allocator.live.load());
    EXPECT_EQ(s.rmb.inUseBytes + s.sndbuf.inUseBytes, 0);
    pool.reset();
    EXPECT_EQ(allocator.live.load(), 0u);
    EXPECT_EQ(registrar.liveCount(), 0u);
}

TEST(LoopbackIsmStress, MoveDataRacesUnregisterSafely)
{
    LoopbackIsm dev;
    std::atomic<DmbToken> current{0};
    std::atomic<bool> stop{false};
    std::atomic<int> landed{0};
    std::vector<std::thread> writers;
    for (std::size_t i = 0; i < 4; ++i) {
        writers.emplace_back([&, i] {
            const std::byte data[64]{};
            while (!stop.load()) {
                // Each writer its own range, like peers writing distinct cursors.
                Result<void> r = dev.moveData(current.load(), i * sizeof data, data, true);
                if (r)
                    ++landed;
                else if (r.error() != IsmErrc::UnknownToken)
                    ADD_FAILURE() << r.error().message();
            }
        });
    }
    // 200 rounds, and more until a write landed: on a loaded machine the writers may not have
    // run at all during the first 200 (a few milliseconds).
    const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int round = 0;
         round < 200 || (landed.load() == 0 && std::chrono::steady_clock::now() < giveUp);
         ++round) {
        Result<DmbInfo> dmb = dev.registerDmb(MmapAllocator::instance().allocate(16384), 16384);
        ASSERT_TRUE(dmb);
        current = dmb->token;
        std::this_thread::yield();
        ASSERT_TRUE(dev.unregisterDmb(dmb->token));
    }
    stop = true;
    for (auto& w : writers)
        w.join();
    EXPECT_EQ(dev.dmbCount(), 0u);
    EXPECT_GT(landed.load(), 0);
}

// Signal handlers unregister the DMB they were raised for while other
// threads keep writing into it: each DMB is freed exactly once, by its last
// user, and no write lands in freed memory (ASan) or races (TSan).
TEST(LoopbackIsmStress, HandlersUnregisterTheirDmbWhileOthersWrite)
{
    Watchdog watchdog(std::chrono::seconds(120)); // such a handler used to hang
    std::atomic<int> unregistered{0};
    LoopbackIsm* device = nullptr;
    LoopbackIsm dev([&](std::uint32_t, DmbToken token) {
        if (device->unregisterDmb(token))
            ++unregistered;
    });
    device = &dev;
    std::atomic<DmbToken> current{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (std::size_t i = 0; i < 4; ++i) {
        writers.emplace_back([&, i] {
            const std::byte data[64]{std::byte{1}};
            while (!stop.load())
                (void)dev.moveData(current.load(), i * sizeof data, data, (i & 1) != 0);
        });
    }
    constexpr int kRounds = 150;
    std::vector<std::weak_ptr<std::byte>> memories;
    for (int round = 0; round < kRounds; ++round) {
        auto memory = MmapAllocator::instance().allocate(16384);
        memories.push_back(memory);
        Result<DmbInfo> dmb = dev.registerDmb(std::move(memory), 16384);
        ASSERT_TRUE(dmb);
        current = dmb->token;
        // A signalling writer's handler unregisters it; give up after a while.
        for (int spin = 0; spin < 100000 && dev.moveData(dmb->token, 0, {}, false); ++spin)
            std::this_thread::yield();
        (void)dev.unregisterDmb(dmb->token); // if no handler got there first
    }
    stop = true;
    for (auto& w : writers)
        w.join();
    EXPECT_EQ(dev.dmbCount(), 0u);
    EXPECT_GT(unregistered.load(), 0);
    for (const auto& m : memories)
        EXPECT_TRUE(m.expired());
}

TEST(SmcDPoolStress, ConcurrentConnectionsOnLoopback)
{
    LoopbackIsm dev;
    IsmRegistrar registrar(dev);
    PoolConfig config;
    config.tech = Tech::SmcD;
    auto pool = std::move(BufferPool::create(config, registrar)).value();
    std::vector<std::thread> workers;
    std::atomic<int> errors{0};
    for (int id = 0; id < kThreads; ++id) {
        workers.emplace_back([&, id] {
            std::mt19937 rng(static_cast<unsigned>(id));
            const std::byte request[64]{std::byte{1}};
            for (int i = 0; i < kIterations / 3; ++i) {
                Result<BufferRef> rmb = pool->acquire(BufferKind::Rmb, kSizes[rng() % 4]);
                Result<BufferRef> snd = pool->acquire(BufferKind::Sndbuf, kSizes[rng() % 4]);
                if (!rmb || !snd || !dev.moveData((*rmb)->dmbToken(), 32, request, true)) {
                    ++errors;
                    continue;
                }
                if (rmb->data()[32] != std::byte{1})
                    ++errors;
                rmb->data()[32] = std::byte{0};
                if (!pool->release(*rmb) || !pool->release(*snd))
                    ++errors;
            }
        });
    }
    for (auto& w : workers)
        w.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(dev.dmbCount(), pool->stats().rmb.descriptors);
    pool.reset();
    EXPECT_EQ(dev.dmbCount(), 0u);
}

} // namespace
} // namespace smc
