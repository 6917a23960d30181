// SPDX-License-Identifier: MIT
// BufferPool behaviour, one typed suite run against all three lock policies.
#include "pool/buffer_pool.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "tests/libtest/fakes.h"
#include "tests/libtest/policies.h"

namespace smc
{
namespace
{

using test::CountingAllocator;
using test::FakeRegistrar;

template <typename Tag> class BufferPoolTest : public ::testing::Test
{
protected:
    std::unique_ptr<BufferPool> makePool(PoolConfig config = {})
    {
        config.policy = Tag::kPolicy;
        if (config.allocator == nullptr)
            config.allocator = &allocator_;
        Result<std::unique_ptr<BufferPool>> pool = BufferPool::create(config, registrar_);
        EXPECT_TRUE(pool) << pool.error().message();
        return std::move(pool).value();
    }

    void TearDown() override
    {
        EXPECT_EQ(allocator_.live.load(), 0u) << "memory leaked past the pool";
        EXPECT_EQ(registrar_.liveCount(), 0u) << "registrations leaked past the pool";
        EXPECT_EQ(registrar_.violations(), 0) << "double or unbalanced registration";
    }

    CountingAllocator allocator_;
    FakeRegistrar registrar_;
};

TYPED_TEST_SUITE(BufferPoolTest, test::Policies, test::PolicyName);

TYPED_TEST(BufferPoolTest, RoundsUpAndReportsTheClass)
{
    auto pool = this->makePool();
    Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 40000);
    ASSERT_TRUE(b) << b.error().message();
    EXPECT_EQ(b->size(), 65536u);
    EXPECT_EQ((*b)->sizeClass(), 2u);
    EXPECT_EQ((*b)->kind(), BufferKind::Rmb);
    EXPECT_TRUE(pool->release(*b));
}

TYPED_TEST(BufferPoolTest, MemoryIsPageAlignedAndZeroOnFirstUse)
{
    auto pool = this->makePool();
    Result<BufferRef> b = pool->acquire(BufferKind::Sndbuf, 16384);
    ASSERT_TRUE(b);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->data()) % 4096, 0u);
    EXPECT_TRUE(std::all_of(b->data(), b->data() + b->size(),
                            [](std::byte x) { return x == std::byte{0}; }));
    EXPECT_TRUE(pool->release(*b));
}

TYPED_TEST(BufferPoolTest, ReuseReturnsTheSameDescriptor)
{
    auto pool = this->makePool();
    Result<BufferRef> first = pool->acquire(BufferKind::Rmb, 65536);
    ASSERT_TRUE(first);
    BufferDesc* desc = first->desc();
    ASSERT_TRUE(pool->release(*first));
    Result<BufferRef> second = pool->acquire(BufferKind::Rmb, 50000); // same class
    ASSERT_TRUE(second);
    EXPECT_EQ(second->desc(), desc);
    EXPECT_NE(second->generation(), first->generation());
    // A different kind never gets it.
    Result<BufferRef> other = pool->acquire(BufferKind::Sndbuf, 65536);
    ASSERT_TRUE(other);
    EXPECT_NE(other->desc(), desc);
    PoolStats s = pool->stats();
    EXPECT_EQ(s.rmb.allocs, 1u);
    EXPECT_EQ(s.rmb.reuses, 1u);
    EXPECT_EQ(s.sndbuf.allocs, 1u);
    EXPECT_TRUE(pool->release(*second));
    EXPECT_TRUE(pool->release(*other));
}

TYPED_TEST(BufferPoolTest, ZeroOnReleaseScrubsOnlyWhenAsked)
{
    for (bool zero : {false, true}) {
        PoolConfig config;
        config.zeroOnRelease = zero;
        auto pool = this->makePool(config);
        Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 16384);
        ASSERT_TRUE(b);
        std::memset(b->data(), 0xab, b->size());
        ASSERT_TRUE(pool->release(*b));
        Result<BufferRef> again = pool->acquire(BufferKind::Rmb, 16384);
        ASSERT_TRUE(again);
        ASSERT_EQ(again->desc(), b->desc());
        EXPECT_EQ(again->data()[100], zero ? std::byte{0} : std::byte{0xab});
        EXPECT_TRUE(pool->release(*again));
    }
}

TYPED_TEST(BufferPoolTest, InvalidSizesAreClearErrors)
{
    auto pool = this->makePool();
    for (std::size_t bytes : {std::size_t{0}, classBytes(kMaxClassSmcR) + 1}) {
        Result<BufferRef> b = pool->acquire(BufferKind::Rmb, bytes);
        ASSERT_FALSE(b);
        EXPECT_EQ(b.error(), PoolErrc::InvalidSize);
    }
    EXPECT_EQ(pool->stats().rmb.failures, 2u);
    EXPECT_EQ(pool->stats().rmb.descriptors, 0u);
}

TYPED_TEST(BufferPoolTest, AnUnknownKindIsAClearError)
{
    auto pool = this->makePool();
    for (unsigned k : {2u, 7u, 255u}) {
        Result<BufferRef> b = pool->acquire(static_cast<BufferKind>(k), 16384);
        ASSERT_FALSE(b) << k;
        EXPECT_EQ(b.error(), PoolErrc::InvalidKind) << k;
    }
    EXPECT_EQ(pool->stats().rmb.failures + pool->stats().sndbuf.failures, 0u)
        << "no kind to count it for";
    EXPECT_EQ(this->allocator_.live.load(), 0u);
    Result<BufferRef> fine = pool->acquire(BufferKind::Sndbuf, 16384);
    ASSERT_TRUE(fine);
    EXPECT_TRUE(pool->release(*fine));
}

TYPED_TEST(BufferPoolTest, DowngradesWhenAllocationFails)
{
    auto pool = this->makePool();
    this->allocator_.failFrom = 65536; // 64 KiB and up cannot be had
    Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 128 * 1024);
    ASSERT_TRUE(b) << b.error().message();
    EXPECT_EQ(b->size(), 32768u);
    PoolStats s = pool->stats();
    EXPECT_EQ(s.rmb.downgrades, 1u);
    EXPECT_EQ(s.rmb.allocs, 1u);
    EXPECT_EQ(s.rmb.classHistogram[1], 1u);
    EXPECT_TRUE(pool->release(*b));

    // With a free 32 KiB buffer in the pool, the downgrade reuses it.
    Result<BufferRef> again = pool->acquire(BufferKind::Rmb, 128 * 1024);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->desc(), b->desc());
    EXPECT_EQ(pool->stats().rmb.downgrades, 2u);
    EXPECT_TRUE(pool->release(*again));
}

TYPED_TEST(BufferPoolTest, OutOfMemoryAtEveryClassIsAnError)
{
    auto pool = this->makePool();
    this->allocator_.failFrom = 1;
    Result<BufferRef> b = pool->acquire(BufferKind::Sndbuf, 65536);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error(), PoolErrc::OutOfMemory);
    PoolStats s = pool->stats();
    EXPECT_EQ(s.sndbuf.failures, 1u);
    EXPECT_EQ(s.sndbuf.descriptors, 0u);
    EXPECT_EQ(s.sndbuf.pooledBytes, 0u);
}

TYPED_TEST(BufferPoolTest, MemoryLimitIsAClearErrorAndLeaksNothing)
{
    PoolConfig config;
    config.memoryLimit = 64 * 1024;
    auto pool = this->makePool(config);
    Result<BufferRef> big = pool->acquire(BufferKind::Rmb, 64 * 1024);
    ASSERT_TRUE(big);
    Result<BufferRef> more = pool->acquire(BufferKind::Sndbuf, 16384);
    ASSERT_FALSE(more);
    EXPECT_EQ(more.error(), PoolErrc::LimitReached);
    EXPECT_EQ(this->allocator_.live.load(), 64u * 1024);
    PoolStats s = pool->stats();
    EXPECT_EQ(s.rmb.pooledBytes + s.sndbuf.pooledBytes, 64u * 1024);
    EXPECT_EQ(s.sndbuf.failures, 1u);

    // Released memory is reused within the limit.
    ASSERT_TRUE(pool->release(*big));
    Result<BufferRef> reuse = pool->acquire(BufferKind::Rmb, 40000);
    ASSERT_TRUE(reuse);
    EXPECT_EQ(reuse->desc(), big->desc());
    EXPECT_TRUE(pool->release(*reuse));
}

TYPED_TEST(BufferPoolTest, MemoryLimitDowngradesBeforeFailing)
{
    PoolConfig config;
    config.memoryLimit = 48 * 1024;
    auto pool = this->makePool(config);
    Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 64 * 1024);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->size(), 32768u);
    EXPECT_EQ(pool->stats().rmb.downgrades, 1u);
    EXPECT_TRUE(pool->release(*b));
}

TYPED_TEST(BufferPoolTest, RegistrationFailureFreesTheDescriptor)
{
    auto pool = this->makePool();
    ASSERT_TRUE(pool->addLink(0));
    this->registrar_.failNext(1);
    Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 16384);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error(), std::errc::io_error) << "the registrar's own reason comes through";
    PoolStats s = pool->stats();
    EXPECT_EQ(s.rmb.freed, 1u);
    EXPECT_EQ(s.rmb.descriptors, 0u);
    EXPECT_EQ(s.rmb.failures, 1u);
    EXPECT_EQ(this->allocator_.live.load(), 0u) << "the refused buffer's memory is gone";

    // The next acquire creates and registers a fresh buffer.
    Result<BufferRef> fresh = pool->acquire(BufferKind::Rmb, 16384);
    ASSERT_TRUE(fresh);
    EXPECT_TRUE(fresh->desc()->isRegistered(0));
    EXPECT_TRUE(this->registrar_.isRegistered(fresh->desc(), 0));
    EXPECT_EQ(pool->stats().rmb.allocs, 1u);
    EXPECT_TRUE(pool->release(*fresh));
}

TYPED_TEST(BufferPoolTest, PartialRegistrationIsUndone)
{
    auto pool = this->makePool();
    ASSERT_TRUE(pool->addLink(0));
    ASSERT_TRUE(pool->addLink(1));
    this->registrar_.failWhen([](const BufferDesc&, unsigned link) { return link == 1; });
    Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 16384);
    ASSERT_FALSE(b);
    EXPECT_EQ(this->registrar_.liveCount(), 0u) << "link 0 registration rolled back";
    EXPECT_EQ(this->registrar_.unregistered(), 1);
}

TYPED_TEST(BufferPoolTest, DoubleReleaseIsRefusedWithoutHarm)
{
    auto pool = this->makePool();
    Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 16384);
    ASSERT_TRUE(b);
    EXPECT_TRUE(pool->release(*b));
    EXPECT_EQ(pool->release(*b).error(), PoolErrc::DoubleRelease);
    EXPECT_EQ(pool->stats().rmb.releases, 1u);

    // A stale lease cannot release the buffer from its new owner.
    Result<BufferRef> owner = pool->acquire(BufferKind::Rmb, 16384);
    ASSERT_TRUE(owner);
    ASSERT_EQ(owner->desc(), b->desc());
    std::memset(owner->data(), 0x5a, 64);
    EXPECT_EQ(pool->release(*b).error(), PoolErrc::DoubleRelease);
    EXPECT_EQ(owner->data()[0], std::byte{0x5a});
    Result<BufferRef> other = pool->acquire(BufferKind::Rmb, 16384);
    ASSERT_TRUE(other);
    EXPECT_NE(other->desc(), owner->desc()) << "still owned, so not handed out again";
    EXPECT_TRUE(pool->release(*owner));
    EXPECT_TRUE(pool->release(*other));
    EXPECT_EQ(pool->stats().rmb.inUseBytes, 0);
}

TYPED_TEST(BufferPoolTest, ForeignAndInvalidBuffersAreRefused)
{
    auto a = this->makePool();
    auto b = this->makePool();
    Result<BufferRef> buf = a->acquire(BufferKind::Sndbuf, 16384);
    ASSERT_TRUE(buf);
    EXPECT_EQ(b->release(*buf).error(), PoolErrc::ForeignBuffer);
    EXPECT_EQ(b->release(BufferRef{}).error(), PoolErrc::InvalidBuffer);
    EXPECT_EQ(b->stats().sndbuf.releases, 0u);
    EXPECT_TRUE(a->release(*buf)) << "the real owner still can";
}

TYPED_TEST(BufferPoolTest, StatisticsAddUp)
{
    auto pool = this->makePool();
    std::vector<BufferRef> held;
    const std::size_t sizes[] = {16384, 32768, 65536, 131072, 20000, 16384};
    for (std::size_t size : sizes) {
        Result<BufferRef> b = pool->acquire(BufferKind::Rmb, size);
        ASSERT_TRUE(b);
        held.push_back(*b);
    }
    std::int64_t heldBytes = 0;
    for (const BufferRef& b : held)
        heldBytes += static_cast<std::int64_t>(b.size());
    PoolStats s = pool->stats();
    EXPECT_EQ(s.rmb.inUseBytes, heldBytes);
    EXPECT_EQ(s.rmb.pooledBytes, static_cast<std::uint64_t>(heldBytes));
    EXPECT_EQ(s.rmb.descriptors, held.size());

    for (std::size_t i = 0; i < 3; ++i)
        ASSERT_TRUE(pool->release(held[i]));
    for (int i = 0; i < 3; ++i) {
        Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 16384);
        ASSERT_TRUE(b);
        ASSERT_TRUE(pool->release(*b));
    }
    for (std::size_t i = 3; i < held.size(); ++i)
        ASSERT_TRUE(pool->release(held[i]));

    s = pool->stats();
    std::uint64_t histogram = 0;
    for (std::uint64_t n : s.rmb.classHistogram)
        histogram += n;
    EXPECT_EQ(s.rmb.allocs + s.rmb.reuses, 9u);
    EXPECT_EQ(histogram, 9u);
    EXPECT_EQ(s.rmb.releases, 9u);
    EXPECT_EQ(s.rmb.inUseBytes, 0);
    EXPECT_EQ(s.rmb.allocs, s.rmb.descriptors);
    EXPECT_EQ(s.sndbuf.allocs, 0u);
    const std::string json = s.toJson();
    EXPECT_NE(json.find("\"rmb\":{\"allocs\":" + std::to_string(s.rmb.allocs)), std::string::npos)
        << json;
    EXPECT_NE(json.find("\"in_use_bytes\":0"), std::string::npos) << json;
    EXPECT_NE(json.find("\"16K\":"), std::string::npos) << json;
}

TYPED_TEST(BufferPoolTest, AddLinkRegistersEveryBufferAndRemoveLinkUndoesIt)
{
    auto pool = this->makePool();
    ASSERT_TRUE(pool->addLink(0));
    std::vector<BufferRef> held;
    for (std::size_t size : {16384, 65536, 65536, 1 << 20}) {
        Result<BufferRef> rmb = pool->acquire(BufferKind::Rmb, size);
        Result<BufferRef> snd = pool->acquire(BufferKind::Sndbuf, size);
        ASSERT_TRUE(rmb && snd);
        held.push_back(*rmb);
        held.push_back(*snd);
    }
    ASSERT_TRUE(pool->release(held[0])); // free buffers are registered too
    EXPECT_EQ(this->registrar_.liveOn(1), 0u);

    ASSERT_TRUE(pool->addLink(1));
    EXPECT_EQ(pool->linkMask(), 0b011u);
    EXPECT_EQ(this->registrar_.liveOn(1), held.size());
    for (const BufferRef& b : held)
        EXPECT_TRUE(b->isRegistered(1) && this->registrar_.isRegistered(b.desc(), 1));
    EXPECT_EQ(pool->addLink(1).error(), PoolErrc::LinkExists);
    EXPECT_EQ(pool->addLink(3).error(), PoolErrc::InvalidLink);

    ASSERT_TRUE(pool->removeLink(0));
    EXPECT_EQ(pool->linkMask(), 0b010u);
    EXPECT_EQ(this->registrar_.liveOn(0), 0u);
    EXPECT_EQ(pool->removeLink(0).error(), PoolErrc::NoSuchLink);
    for (std::size_t i = 1; i < held.size(); ++i)
        ASSERT_TRUE(pool->release(held[i]));
}

TYPED_TEST(BufferPoolTest, FailedAddLinkLeavesNoTrace)
{
    auto pool = this->makePool();
    ASSERT_TRUE(pool->addLink(0));
    std::vector<BufferRef> held;
    for (int i = 0; i < 5; ++i) {
        Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 16384);
        ASSERT_TRUE(b);
        held.push_back(*b);
    }
    int seen = 0;
    this->registrar_.failWhen(
        [&seen](const BufferDesc&, unsigned link) { return link == 2 && ++seen == 3; });
    EXPECT_FALSE(pool->addLink(2));
    EXPECT_EQ(pool->linkMask(), 0b001u);
    EXPECT_EQ(this->registrar_.liveOn(2), 0u);
    this->registrar_.failWhen(nullptr);
    // Buffers keep working, and the link can be added later.
    for (const BufferRef& b : held)
        ASSERT_TRUE(pool->release(b));
    ASSERT_TRUE(pool->addLink(2));
    EXPECT_EQ(this->registrar_.liveOn(2), held.size());
}

TYPED_TEST(BufferPoolTest, SmcDPoolHasNoLinksAndCapsAtOneMiB)
{
    PoolConfig config;
    config.tech = Tech::SmcD;
    auto pool = this->makePool(config);
    EXPECT_EQ(pool->addLink(1).error(), PoolErrc::NotSupported);
    Result<BufferRef> max = pool->acquire(BufferKind::Rmb, 1 << 20);
    ASSERT_TRUE(max);
    EXPECT_TRUE(max->desc()->isRegistered(0)) << "the device is link 0";
    EXPECT_EQ(pool->acquire(BufferKind::Rmb, (1 << 20) + 1).error(), PoolErrc::InvalidSize);
    EXPECT_TRUE(pool->release(*max));
}

TYPED_TEST(BufferPoolTest, BuffersLeftInAnExitedThreadsCacheAreFound)
{
    PoolConfig config;
    config.memoryLimit = 16384 * 4;
    auto pool = this->makePool(config);
    std::thread([&] {
        std::vector<BufferRef> held;
        for (int i = 0; i < 4; ++i)
            held.push_back(*pool->acquire(BufferKind::Sndbuf, 16384));
        for (const BufferRef& b : held)
            ASSERT_TRUE(pool->release(b));
    }).join();
    // All memory is in free buffers, some possibly cached by the dead thread:
    // four acquires here must all succeed without new memory.
    std::vector<BufferRef> mine;
    for (int i = 0; i < 4; ++i) {
        Result<BufferRef> b = pool->acquire(BufferKind::Sndbuf, 16384);
        ASSERT_TRUE(b) << i << ": " << b.error().message();
        mine.push_back(*b);
    }
    EXPECT_EQ(pool->stats().sndbuf.allocs, 4u);
    for (const BufferRef& b : mine)
        ASSERT_TRUE(pool->release(b));
}

TYPED_TEST(BufferPoolTest, BuffersSnapshotListsEveryLiveBuffer)
{
    auto pool = this->makePool();
    Result<BufferRef> a = pool->acquire(BufferKind::Rmb, 16384);
    Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 65536);
    Result<BufferRef> c = pool->acquire(BufferKind::Sndbuf, 16384);
    ASSERT_TRUE(a && b && c);
    ASSERT_TRUE(pool->release(*b));
    std::vector<BufferDesc*> rmbs = pool->buffers(BufferKind::Rmb);
    std::sort(rmbs.begin(), rmbs.end());
    std::vector<BufferDesc*> expected{a->desc(), b->desc()};
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(rmbs, expected);
    EXPECT_EQ(pool->buffers(BufferKind::Sndbuf), std::vector<BufferDesc*>{c->desc()});
    EXPECT_TRUE(pool->release(*a));
    EXPECT_TRUE(pool->release(*c));
}

TEST(BufferPoolConfig, RejectsAnImpossibleDescriptorBound)
{
    test::FakeRegistrar registrar;
    PoolConfig config;
    config.maxDescriptors = 0;
    EXPECT_FALSE(BufferPool::create(config, registrar));
}

TEST(BufferPoolConfig, TableFullIsAClearError)
{
    test::FakeRegistrar registrar;
    PoolConfig config;
    config.maxDescriptors = 2;
    auto pool = std::move(BufferPool::create(config, registrar)).value();
    Result<BufferRef> a = pool->acquire(BufferKind::Rmb, 16384);
    Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 16384);
    ASSERT_TRUE(a && b);
    Result<BufferRef> c = pool->acquire(BufferKind::Rmb, 16384);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), PoolErrc::TableFull);
    EXPECT_TRUE(pool->release(*a));
    EXPECT_TRUE(pool->release(*b));
}

} // namespace
} // namespace smc
