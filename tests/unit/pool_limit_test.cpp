// SPDX-License-Identifier: MIT
// The pool's memory limit: free buffers of other kinds and classes are reclaimed before
// LimitReached.
#include <cstring>
#include <future>
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

constexpr std::size_t kKiB = 1024;

template <typename Tag> class PoolLimitTest : public ::testing::Test
{
protected:
    std::unique_ptr<BufferPool> makePool(std::size_t limit, Registrar* registrar = nullptr,
                                         Tech tech = Tech::SmcR)
    {
        PoolConfig config;
        config.policy = Tag::kPolicy;
        config.tech = tech;
        config.memoryLimit = limit;
        config.allocator = &allocator_;
        Result<std::unique_ptr<BufferPool>> pool =
            BufferPool::create(config, registrar ? *registrar : registrar_);
        EXPECT_TRUE(pool) << pool.error().message();
        return std::move(pool).value();
    }

    // Acquires `n` buffers of `kind` and `bytes`, then releases them all: free, pooled memory.
    void churn(BufferPool& pool, BufferKind kind, std::size_t bytes, int n)
    {
        std::vector<BufferRef> held;
        for (int i = 0; i < n; ++i) {
            Result<BufferRef> b = pool.acquire(kind, bytes);
            ASSERT_TRUE(b) << i << ": " << b.error().message();
            held.push_back(*b);
        }
        for (const BufferRef& b : held)
            ASSERT_TRUE(pool.release(b));
    }

    void TearDown() override
    {
        EXPECT_EQ(allocator_.live.load(), 0u) << "memory leaked past the pool";
        EXPECT_EQ(registrar_.liveCount(), 0u) << "registrations leaked past the pool";
        EXPECT_EQ(registrar_.violations(), 0) << "double or unbalanced registration";
    }

    test::CountingAllocator allocator_;
    test::FakeRegistrar registrar_;
};

TYPED_TEST_SUITE(PoolLimitTest, test::Policies, test::PolicyName);

// The reported sequence: 8 x 32 KiB sndbufs come and go under a 256 KiB
// limit; afterwards every RMB acquire used to fail for good.
TYPED_TEST(PoolLimitTest, FreeSndbufsMakeRoomForRmbs)
{
    auto pool = this->makePool(256 * kKiB);
    ASSERT_TRUE(pool->addLink(0));
    this->churn(*pool, BufferKind::Sndbuf, 32 * kKiB, 8);
    ASSERT_EQ(pool->stats().sndbuf.pooledBytes, 256 * kKiB);

    Result<BufferRef> rmb = pool->acquire(BufferKind::Rmb, 64 * kKiB);
    ASSERT_TRUE(rmb) << rmb.error().message();
    EXPECT_EQ(rmb->size(), 64 * kKiB) << "room was made at the requested class";
    EXPECT_TRUE((*rmb)->isRegistered(0));
    PoolStats s = pool->stats();
    EXPECT_EQ(s.sndbuf.reclaimed, 2u) << "only what the RMB needs";
    EXPECT_EQ(s.sndbuf.reclaimedBytes, 64 * kKiB);
    EXPECT_EQ(s.sndbuf.freed, 2u);
    EXPECT_EQ(s.sndbuf.descriptors, 6u);
    EXPECT_EQ(s.rmb.reclaimed, 0u);
    EXPECT_EQ(s.rmb.downgrades, 0u);
    EXPECT_EQ(this->registrar_.liveOn(0), 7u) << "reclaimed buffers are unregistered";
    ASSERT_TRUE(pool->release(*rmb));

    // Every RMB size up to the whole limit can be had, one after the other.
    for (std::size_t bytes = 16 * kKiB; bytes <= 256 * kKiB; bytes *= 2) {
        Result<BufferRef> b = pool->acquire(BufferKind::Rmb, bytes);
        ASSERT_TRUE(b) << bytes << ": " << b.error().message();
        EXPECT_EQ(b->size(), bytes);
        EXPECT_LE(this->allocator_.live.load(), 256 * kKiB);
        ASSERT_TRUE(pool->release(*b));
    }
    s = pool->stats();
    EXPECT_EQ(s.sndbuf.reclaimed, 8u);
    EXPECT_EQ(s.sndbuf.descriptors, 0u);
    EXPECT_GT(s.rmb.reclaimed, 0u) << "smaller free RMBs made room for bigger ones";
    EXPECT_EQ(s.rmb.failures + s.sndbuf.failures, 0u);
    EXPECT_EQ(this->registrar_.liveOn(0), s.rmb.descriptors);
    const std::string json = s.toJson();
    EXPECT_NE(json.find("\"reclaimed\":8,\"reclaimed_bytes\":262144"), std::string::npos) << json;
}

// Free buffers are reclaimable wherever they are cached: the per-thread
// caches of the default policy hold hints, not ownership.
TYPED_TEST(PoolLimitTest, BuffersInALiveThreadsCacheAreReclaimed)
{
    auto pool = this->makePool(256 * kKiB);
    std::promise<void> cached;
    std::promise<void> done;
    std::thread other([&] {
        this->churn(*pool, BufferKind::Sndbuf, 32 * kKiB, 8);
        cached.set_value();
        done.get_future().wait(); // alive, its cache full, while we reclaim
    });
    cached.get_future().wait();
    Result<BufferRef> rmb = pool->acquire(BufferKind::Rmb, 128 * kKiB);
    EXPECT_TRUE(rmb) << rmb.error().message();
    done.set_value();
    other.join();
    ASSERT_TRUE(rmb);
    EXPECT_EQ(pool->stats().sndbuf.reclaimed, 4u);
    // The other thread's stale hints do no harm: its buffers are still reused.
    this->churn(*pool, BufferKind::Sndbuf, 32 * kKiB, 4);
    EXPECT_EQ(pool->stats().sndbuf.allocs, 8u);
    ASSERT_TRUE(pool->release(*rmb));
}

TYPED_TEST(PoolLimitTest, LeasedBuffersStayAndOnlyWhatFitsIsReclaimed)
{
    auto pool = this->makePool(64 * kKiB);
    Result<BufferRef> held = pool->acquire(BufferKind::Rmb, 16 * kKiB);
    ASSERT_TRUE(held);
    std::memset(held->data(), 0x5a, held->size());
    this->churn(*pool, BufferKind::Sndbuf, 16 * kKiB, 3); // the limit is full

    // 64 KiB cannot fit beside the leased 16 KiB whatever is freed, so
    // nothing is freed for it; 32 KiB can, after two of the three sndbufs go.
    Result<BufferRef> rmb = pool->acquire(BufferKind::Rmb, 64 * kKiB);
    ASSERT_TRUE(rmb) << rmb.error().message();
    EXPECT_EQ(rmb->size(), 32 * kKiB);
    PoolStats s = pool->stats();
    EXPECT_EQ(s.rmb.downgrades, 1u);
    EXPECT_EQ(s.sndbuf.reclaimed, 2u);
    EXPECT_EQ(s.sndbuf.descriptors, 1u);
    EXPECT_EQ(s.rmb.reclaimed, 0u) << "the leased RMB is never reclaimed";

    Result<BufferRef> last = pool->acquire(BufferKind::Rmb, 16 * kKiB);
    ASSERT_TRUE(last);
    EXPECT_EQ(pool->stats().sndbuf.reclaimed, 3u);
    Result<BufferRef> none = pool->acquire(BufferKind::Sndbuf, 16 * kKiB);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error(), PoolErrc::LimitReached) << "everything is leased";
    EXPECT_EQ(held->data()[held->size() - 1], std::byte{0x5a});
    EXPECT_EQ(pool->stats().rmb.descriptors, 3u);
    for (const BufferRef& b : {*held, *rmb, *last})
        ASSERT_TRUE(pool->release(b));
}

TYPED_TEST(PoolLimitTest, SmcDReclaimUnregistersTheDmb)
{
    LoopbackIsm dev;
    IsmRegistrar registrar(dev);
    auto pool = this->makePool(64 * kKiB, &registrar, Tech::SmcD);
    this->churn(*pool, BufferKind::Rmb, 16 * kKiB, 4);
    ASSERT_EQ(dev.dmbCount(), 4u);
    Result<BufferRef> snd = pool->acquire(BufferKind::Sndbuf, 32 * kKiB);
    ASSERT_TRUE(snd) << snd.error().message();
    EXPECT_EQ(pool->stats().rmb.reclaimed, 2u);
    EXPECT_EQ(dev.dmbCount(), 2u) << "a reclaimed RMB's DMB goes with it";
    ASSERT_TRUE(pool->release(*snd));
    pool.reset();
    EXPECT_EQ(dev.dmbCount(), 0u);
}

} // namespace
} // namespace smc
