// SPDX-License-Identifier: MIT
// Real libibverbs on a soft-RoCE device: registration, RDMA WRITE, SEND/RECV slots, link down.
// Without a device this exits 77 (skipped); inside the rxe guest a missing device fails.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pool/buffer_pool.h"
#include "rdma/rc_link.h"
#include "rdma/rdma_registrar.h"
#include "tests/libtest/rdma_device.h"

namespace smc::rdma
{
namespace
{

using namespace std::chrono_literals;

// Two RC links on the device, each with its own PD, connected to each other.
// Each has an executor of its own, as on two hosts: a stalled handler of B
// (gateB) stalls only B's completions, not A's.
struct LinkPair {
    Context context;
    ProtectionDomain pdA, pdB;
    Executor executorA{{.threads = 1}}, executorB{{.threads = 1}};
    std::mutex mutex;
    std::condition_variable arrived;
    using Message = std::vector<std::byte>;
    std::vector<Message> atA, atB;
    std::atomic<int> downA{0}, downB{0};
    // Runs before B handles a message. Under `mutex`: the test sets it while
    // B's handler may run, ordered only through the device (TSan cannot see that).
    std::function<void()> gateB;
    // Last, so destroyed first: their handlers use everything above.
    std::unique_ptr<RcLink> a, b;

    void setUp(std::size_t maxMessage = kMessageSize)
    {
        LinkConfig config;
        config.maxMessage = maxMessage;
        context = std::move(Context::open(test::rdmaDeviceName())).value();
        pdA = std::move(ProtectionDomain::create(context)).value();
        pdB = std::move(ProtectionDomain::create(context)).value();
        Result<std::unique_ptr<RcLink>> la =
            RcLink::create(context, pdA, config,
                           {[this](std::span<const std::byte> m) { deliver(atA, m); },
                            [this](std::error_code) { ++downA; }},
                           executorA);
        ASSERT_TRUE(la) << la.error().message();
        Result<std::unique_ptr<RcLink>> lb =
            RcLink::create(context, pdB, config,
                           {[this](std::span<const std::byte> m) {
                                if (std::function<void()> g = gate())
                                    g();
                                deliver(atB, m);
                            },
                            [this](std::error_code) { ++downB; }},
                           executorB);
        ASSERT_TRUE(lb) << lb.error().message();
        a = std::move(*la);
        b = std::move(*lb);
        Result<void> ab = a->connect(b->local());
        ASSERT_TRUE(ab) << "A to B: " << ab.error().message();
        Result<void> ba = b->connect(a->local());
        ASSERT_TRUE(ba) << "B to A: " << ba.error().message();
    }

    std::function<void()> gate()
    {
        std::lock_guard lock(mutex);
        return gateB;
    }

    void deliver(std::vector<Message>& to, std::span<const std::byte> m)
    {
        {
            std::lock_guard lock(mutex);
            to.emplace_back(m.begin(), m.end());
        }
        arrived.notify_all();
    }

    bool waitFor(std::vector<Message>& at, std::size_t n, std::chrono::seconds limit = 30s)
    {
        std::unique_lock lock(mutex);
        return arrived.wait_for(lock, limit, [&] { return at.size() >= n; });
    }
};

LinkPair::Message message(std::uint32_t n, std::size_t size = kMessageSize)
{
    LinkPair::Message m(size);
    std::memcpy(m.data(), &n, sizeof n);
    for (std::size_t i = sizeof n; i < m.size(); ++i)
        m[i] = static_cast<std::byte>(n + i);
    return m;
}

std::unique_ptr<BufferPool> smcrPool(Registrar& registrar)
{
    return std::move(BufferPool::create(PoolConfig{}, registrar)).value();
}

// A pool whose buffers are registered on `pd` as link 0.
std::unique_ptr<BufferPool> poolOn(RdmaRegistrar& registrar, const ProtectionDomain& pd)
{
    registrar.setLink(0, pd);
    auto pool = smcrPool(registrar);
    EXPECT_TRUE(pool->addLink(0));
    return pool;
}

void fillPattern(std::byte* p, std::size_t n, unsigned seed)
{
    for (std::size_t i = 0; i < n; ++i)
        p[i] = static_cast<std::byte>((i * 131 + seed) >> 3);
}

class Rxe : public ::testing::Test
{
protected:
    void SetUp() override { ASSERT_NO_FATAL_FAILURE(links.setUp()); }
    LinkPair links;
};

TEST_F(Rxe, EveryClassRegistersOnTwoLinks)
{
    RdmaRegistrar registrar;
    registrar.setLink(0, links.pdA);
    registrar.setLink(1, links.pdB);
    auto pool = smcrPool(registrar);
    ASSERT_TRUE(pool->addLink(0));
    ASSERT_TRUE(pool->addLink(1));
    std::vector<BufferRef> held;
    for (unsigned cls = 0; cls <= kMaxClassSmcD; ++cls) { // 16 KiB .. 1 MiB
        for (BufferKind kind : {BufferKind::Rmb, BufferKind::Sndbuf}) {
            Result<BufferRef> b = pool->acquire(kind, classBytes(cls));
            ASSERT_TRUE(b) << cls << ": " << b.error().message();
            for (unsigned link : {0u, 1u}) {
                ASSERT_TRUE((*b)->isRegistered(link));
                const LinkRegistration& r = (*b)->registration(link);
                EXPECT_EQ(r.addr, reinterpret_cast<std::uintptr_t>(b->data()));
                EXPECT_NE(r.handle, 0u);
            }
            EXPECT_NE((*b)->registration(0).lkey, (*b)->registration(1).lkey) << "one MR per link";
            held.push_back(*b);
        }
    }
    for (const BufferRef& b : held)
        ASSERT_TRUE(pool->release(b));
}

TEST_F(Rxe, RdmaWriteLandsInThePeerRmbForEveryClass)
{
    RdmaRegistrar mine, peers;
    auto local = poolOn(mine, links.pdA);
    auto peer = poolOn(peers, links.pdB);
    for (unsigned cls = 0; cls <= kMaxClassSmcD; ++cls) {
        Result<BufferRef> snd = local->acquire(BufferKind::Sndbuf, classBytes(cls));
        Result<BufferRef> rmb = peer->acquire(BufferKind::Rmb, classBytes(cls));
        ASSERT_TRUE(snd && rmb);
        fillPattern(snd->data(), snd->size(), cls);
        const LinkRegistration& rt = (*rmb)->registration(0); // the peer's rtoken
        Result<void> w = links.a->rdmaWrite(snd->data(), snd->size(), (*snd)->registration(0).lkey,
                                            {rt.addr, rt.rkey}, 30s);
        ASSERT_TRUE(w) << cls << ": " << w.error().message();
        EXPECT_EQ(std::memcmp(rmb->data(), snd->data(), snd->size()), 0) << "class " << cls;
        ASSERT_TRUE(local->release(*snd));
        ASSERT_TRUE(peer->release(*rmb));
    }
    EXPECT_EQ(links.downA.load(), 0);
}

// SMC-Rv2 links: their 8 KiB slots carry messages of any length up to 8 KiB both ways, in
// order (an ADD_LINK v2 with its rkeys is up to 72 + 16 * 255 bytes). A v1 link refuses a
// message over 44 bytes before it reaches the wire, where the peer's 48-byte slot would fail.
TEST(RxeV2, MessagesOfUpTo8KiBBothWays)
{
    LinkPair v2;
    ASSERT_NO_FATAL_FAILURE(v2.setUp(kV2MessageSize));
    const std::size_t sizes[] = {kMessageSize, 72, 72 + 16 * 255, kV2MessageSize};
    for (std::uint32_t i = 0; i < std::size(sizes); ++i) {
        ASSERT_TRUE(v2.a->send(message(i, sizes[i]), 1s));
        ASSERT_TRUE(v2.b->send(message(100 + i, sizes[i]), 1s));
    }
    ASSERT_TRUE(v2.waitFor(v2.atB, std::size(sizes)));
    ASSERT_TRUE(v2.waitFor(v2.atA, std::size(sizes)));
    for (std::uint32_t i = 0; i < std::size(sizes); ++i) {
        EXPECT_EQ(v2.atB[i], message(i, sizes[i]));
        EXPECT_EQ(v2.atA[i], message(100 + i, sizes[i]));
    }
    EXPECT_EQ(v2.a->send(message(9, kV2MessageSize + 1), 1s).error(), std::errc::message_size);

    LinkPair v1;
    ASSERT_NO_FATAL_FAILURE(v1.setUp());
    EXPECT_EQ(v1.a->send(message(1, 72), 1s).error(), std::errc::message_size);
    ASSERT_TRUE(v1.a->send(message(2), 1s));
    ASSERT_TRUE(v1.waitFor(v1.atB, 1));
    EXPECT_EQ(v1.atB[0], message(2));
    EXPECT_EQ(v1.downA.load() + v1.downB.load(), 0);
}

TEST_F(Rxe, ControlMessagesBothWaysWithSlotExhaustionAndRecovery)
{
    // Both directions, in order.
    for (std::uint32_t i = 0; i < 10; ++i) {
        ASSERT_TRUE(links.a->send(message(i), 1s));
        ASSERT_TRUE(links.b->send(message(100 + i), 1s));
    }
    ASSERT_TRUE(links.waitFor(links.atB, 10));
    ASSERT_TRUE(links.waitFor(links.atA, 10));
    for (std::uint32_t i = 0; i < 10; ++i) {
        EXPECT_EQ(links.atB[i], message(i));
        EXPECT_EQ(links.atA[i], message(100 + i));
    }

    // Stall B's receive path: its receive queue drains, A's sends wait on
    // RNR retries, and A runs out of send slots.
    std::mutex gate;
    std::unique_lock hold(gate);
    {
        std::lock_guard lock(links.mutex);
        links.gateB = [&gate] { std::lock_guard pass(gate); };
    }
    std::uint32_t sent = 10;
    Result<void> r;
    while ((r = links.a->send(message(sent), 2s)))
        ++sent;
    EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
    EXPECT_EQ(links.a->freeSendSlots(), 0u);
    EXPECT_GE(sent, 10 + links.a->sendSlots()) << "at least a slot's worth went out";

    // Recovery: B drains, re-posts its receives, A's slots come back.
    hold.unlock();
    ASSERT_TRUE(links.waitFor(links.atB, sent, 60s)) << links.atB.size() << " of " << sent;
    ASSERT_TRUE(links.a->send(message(sent), 10s));
    ASSERT_TRUE(links.waitFor(links.atB, sent + 1));
    for (std::uint32_t i = 0; i <= sent; ++i)
        ASSERT_EQ(links.atB[i], message(i)) << i;
    EXPECT_EQ(links.downA.load() + links.downB.load(), 0);
}

TEST_F(Rxe, FreedBuffersRkeyNoLongerWorks)
{
    RdmaRegistrar mine, peers;
    auto local = poolOn(mine, links.pdA);
    auto peer = poolOn(peers, links.pdB);
    Result<BufferRef> snd = local->acquire(BufferKind::Sndbuf, 16384);
    Result<BufferRef> rmb = peer->acquire(BufferKind::Rmb, 16384);
    ASSERT_TRUE(snd && rmb);
    const LinkRegistration rt = (*rmb)->registration(0);
    ASSERT_TRUE(links.a->rdmaWrite(snd->data(), 4096, (*snd)->registration(0).lkey,
                                   {rt.addr, rt.rkey}, 30s))
        << "works while registered";

    // Freeing the peer's pool deregisters its buffers; the stale rtoken fails.
    ASSERT_TRUE(peer->release(*rmb));
    peer.reset();
    Result<void> w = links.a->rdmaWrite(snd->data(), 4096, (*snd)->registration(0).lkey,
                                        {rt.addr, rt.rkey}, 30s);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error(), completionError(IBV_WC_REM_ACCESS_ERR)) << w.error().message();
    for (int i = 0; i < 100 && links.downA.load() == 0; ++i)
        std::this_thread::sleep_for(20ms);
    EXPECT_EQ(links.downA.load(), 1) << "the failed WRITE took the link down, once";
    ASSERT_TRUE(local->release(*snd));
}

TEST_F(Rxe, ErrorStateReportsLinkDownExactlyOnce)
{
    ASSERT_TRUE(links.a->send(message(1), 1s));
    ASSERT_TRUE(links.waitFor(links.atB, 1));
    ASSERT_TRUE(links.a->forceError());
    for (int i = 0; i < 250 && !links.a->isDown(); ++i)
        std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(links.a->isDown());
    // Everything after that is refused, and no second report arrives.
    EXPECT_EQ(links.a->send(message(2), 100ms).error(), std::errc::not_connected);
    EXPECT_EQ(links.a->send(message(3), 100ms).error(), std::errc::not_connected);
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(links.downA.load(), 1);
    EXPECT_EQ(links.a->queuePair().state().value(), IBV_QPS_ERR);
}

// What CLC v1 announces: the MAC of the GID's netdev, read here through sysfs instead.
TEST(RxeGid, EveryRoceV2GidHasItsNetdevsMac)
{
    Context context = std::move(Context::open(test::rdmaDeviceName())).value();
    Result<std::vector<int>> gids = context.roceV2Ipv4Gids(1);
    ASSERT_TRUE(gids && !gids->empty());
    for (int index : *gids) {
        const std::string attrs = "/sys/class/infiniband/" + context.name() + "/ports/1/gid_attrs/";
        std::ifstream ndevFile(attrs + "ndevs/" + std::to_string(index));
        std::string ndev;
        ASSERT_TRUE(std::getline(ndevFile, ndev)) << "GID " << index;
        std::ifstream addressFile("/sys/class/net/" + ndev + "/address");
        std::string address;
        ASSERT_TRUE(std::getline(addressFile, address)) << ndev;
        Result<Mac> mac = context.gidMac(1, index);
        ASSERT_TRUE(mac) << mac.error().message();
        char text[18];
        std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", (*mac)[0], (*mac)[1],
                      (*mac)[2], (*mac)[3], (*mac)[4], (*mac)[5]);
        EXPECT_EQ(text, address) << "GID " << index << " on " << ndev;
        EXPECT_NE(*mac, Mac{});
    }
    // An index past the table is the device's error, not a zero MAC.
    EXPECT_FALSE(context.gidMac(1, 100000));
}

// Forwards to an RdmaRegistrar. The bulk registration on link 1 first waits (up to 5 s) for
// 20 more acquire/release rounds: it runs only if the pool lets them run meanwhile. Without
// the wait the test relied on the scheduler to run the workers during a short addLink.
class WaitingRegistrar final : public Registrar
{
public:
    WaitingRegistrar(RdmaRegistrar& inner, std::atomic<int>& rounds)
        : inner_(inner), rounds_(rounds)
    {
    }
    std::error_code registerBuffer(BufferDesc& desc, unsigned link) override
    {
        return inner_.registerBuffer(desc, link);
    }
    void unregisterBuffer(BufferDesc& desc, unsigned link) noexcept override
    {
        inner_.unregisterBuffer(desc, link);
    }
    std::error_code registerBuffers(std::span<BufferDesc* const> descs, unsigned link) override
    {
        if (link == 1) {
            const int start = rounds_.load();
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            while (rounds_.load() < start + 20 && std::chrono::steady_clock::now() < until)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return inner_.registerBuffers(descs, link);
    }

private:
    RdmaRegistrar& inner_;
    std::atomic<int>& rounds_;
};

TEST_F(Rxe, BulkRegistrationOnANewLinkWhileTwoThreadsAcquireRelease)
{
    RdmaRegistrar rdma;
    std::atomic<int> rounds{0};
    WaitingRegistrar registrar(rdma, rounds);
    rdma.setLink(0, links.pdA);
    auto pool = smcrPool(registrar);
    ASSERT_TRUE(pool->addLink(0));
    std::vector<BufferRef> held;
    for (int i = 0; i < 64; ++i) {
        Result<BufferRef> b =
            pool->acquire(i % 2 ? BufferKind::Rmb : BufferKind::Sndbuf, 16384u << (i % 4));
        ASSERT_TRUE(b);
        held.push_back(*b);
    }
    for (std::size_t i = 0; i < held.size(); i += 2)
        ASSERT_TRUE(pool->release(held[i]));

    std::atomic<bool> stop{false};
    std::atomic<int> errors{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < 2; ++t) {
        workers.emplace_back([&, t] {
            while (!stop.load()) {
                Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 16384u << (rounds % 3 + t));
                if (!b || !(*b)->isRegistered(0) || !pool->release(*b))
                    ++errors;
                ++rounds;
            }
        });
    }
    while (rounds.load() < 50)
        std::this_thread::yield();
    rdma.setLink(1, links.pdB);
    const int before = rounds.load();
    ASSERT_TRUE(pool->addLink(1));
    const int during = rounds.load() - before;
    stop = true;
    for (auto& w : workers)
        w.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_GE(during, 20) << "acquire/release went on during the bulk registration";

    // Every buffer is registered on link 1, and its MR works: WRITE into an RMB
    // through its link-1 rtoken (B's PD) from A.
    std::vector<BufferDesc*> rmbs = pool->buffers(BufferKind::Rmb);
    for (BufferDesc* d : pool->buffers(BufferKind::Sndbuf))
        EXPECT_TRUE(d->isRegistered(1));
    for (BufferDesc* d : rmbs)
        ASSERT_TRUE(d->isRegistered(1));
    auto src = std::make_unique<std::byte[]>(16384);
    fillPattern(src.get(), 16384, 7);
    Result<MemoryRegion> srcMr =
        MemoryRegion::create(links.pdA, src.get(), 16384, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(srcMr);
    BufferDesc* target = rmbs.front();
    ASSERT_TRUE(links.a->rdmaWrite(src.get(), 16384, srcMr->lkey(),
                                   {target->registration(1).addr, target->registration(1).rkey},
                                   30s));
    EXPECT_EQ(std::memcmp(target->data(), src.get(), 16384), 0);
    for (std::size_t i = 1; i < held.size(); i += 2)
        ASSERT_TRUE(pool->release(held[i]));
}

} // namespace
} // namespace smc::rdma
