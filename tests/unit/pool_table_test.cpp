// SPDX-License-Identifier: MIT
// The pool's descriptor table: each creating thread's descriptors on pages of their own, and
// the table's limit reached exactly whoever created what.
#include "pool/buffer_pool.h"

#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/libtest/fakes.h"

namespace smc
{
namespace
{

constexpr std::uintptr_t kPage = 4096;

// The pages a descriptor spans.
void addPages(std::set<std::uintptr_t>& pages, const BufferDesc* d)
{
    const auto first = reinterpret_cast<std::uintptr_t>(d);
    for (std::uintptr_t p = first / kPage; p <= (first + sizeof(BufferDesc) - 1) / kPage; ++p)
        pages.insert(p);
}

// Two threads create buffers of every kind and four classes in turns, one each, so their
// descriptors are made interleaved. A thread writes its descriptors' state on every acquire
// and release, and the other core's prefetcher reads lines next to the ones it uses: no page
// may hold both threads' descriptors (with shared pages a thread of bench/lock_contention ran at
// 40-70% of its speed).
TEST(PoolTable, EachThreadsDescriptorsAreOnPagesOfTheirOwn)
{
    test::FakeRegistrar registrar;
    auto pool = std::move(BufferPool::create(PoolConfig{}, registrar)).value();
    std::atomic<int> turn{0};
    std::vector<BufferRef> held[2];
    auto create = [&](int me) {
        for (int step = 0; step < 8; ++step) {
            while (turn.load() % 2 != me)
                std::this_thread::yield();
            const auto kind = step % 2 == 0 ? BufferKind::Rmb : BufferKind::Sndbuf;
            Result<BufferRef> b = pool->acquire(kind, std::size_t{16384} << (step / 2));
            EXPECT_TRUE(b) << b.error().message();
            if (b)
                held[me].push_back(*b);
            turn.fetch_add(1);
        }
    };
    std::thread other(create, 1);
    create(0);
    other.join();
    std::set<std::uintptr_t> pages[2];
    for (int t = 0; t < 2; ++t) {
        ASSERT_EQ(held[t].size(), 8u);
        for (const BufferRef& b : held[t])
            addPages(pages[t], b.desc());
    }
    for (std::uintptr_t p : pages[0])
        EXPECT_EQ(pages[1].count(p), 0u) << "a page holds both threads' descriptors";
    for (int t = 0; t < 2; ++t)
        for (const BufferRef& b : held[t])
            EXPECT_TRUE(pool->release(b));
}

// Slots a thread set aside for itself are not lost to the limit: a table of 100 fills to 100
// descriptors when two threads took their slots first.
TEST(PoolTable, ATableFillsToItsLimitWhoeverSetSlotsAside)
{
    test::FakeRegistrar registrar;
    PoolConfig config;
    config.maxDescriptors = 100;
    auto pool = std::move(BufferPool::create(config, registrar)).value();
    std::vector<BufferRef> held;
    std::thread other([&] { held.push_back(pool->acquire(BufferKind::Rmb, 16384).value()); });
    other.join();
    for (;;) {
        Result<BufferRef> b = pool->acquire(BufferKind::Sndbuf, 16384);
        if (!b) {
            EXPECT_EQ(b.error(), PoolErrc::TableFull);
            break;
        }
        held.push_back(*b);
        ASSERT_LE(held.size(), 100u);
    }
    EXPECT_EQ(held.size(), 100u);
    for (const BufferRef& b : held)
        EXPECT_TRUE(pool->release(b));
}

} // namespace
} // namespace smc
