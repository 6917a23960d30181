// SPDX-License-Identifier: MIT
// loopback-ism: DMB register/attach/detach/move_data/signal, limits, and the SMC-D pool on top.
#include "smc/ism/loopback_ism.h"

#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pool/buffer_pool.h"
#include "smc/ism/ism_registrar.h"

namespace smc
{
namespace
{

std::shared_ptr<std::byte> pages(std::size_t bytes)
{
    return MmapAllocator::instance().allocate(bytes);
}

// Runs `f` on a thread of its own and waits at most `limit` for it. A call
// that hangs is left running, detached: the test fails instead of hanging,
// and `f` must own (shared_ptr) whatever it uses so nothing dangles.
bool finishesWithin(std::chrono::seconds limit, std::function<void()> f)
{
    std::promise<void> done;
    std::future<void> finished = done.get_future();
    std::thread thread([f = std::move(f), done = std::move(done)]() mutable {
        f();
        done.set_value();
    });
    if (finished.wait_for(limit) != std::future_status::ready) {
        thread.detach();
        return false;
    }
    thread.join();
    return true;
}

std::vector<std::byte> pattern(std::size_t n, unsigned seed)
{
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<std::byte>((i * 7 + seed) & 0xff);
    return v;
}

TEST(LoopbackIsm, IdentityLikeLinux)
{
    LoopbackIsm dev;
    EXPECT_EQ(dev.chid(), 0xFFFF);
    EXPECT_TRUE(dev.queryRemoteGid(dev.localGid()));
    IsmGid other = dev.localGid();
    other.gidExt ^= 1;
    EXPECT_FALSE(dev.queryRemoteGid(other));
    EXPECT_TRUE(dev.supportsNoCopy());
}

TEST(LoopbackIsm, AttachSeesWritesWithoutACopy)
{
    LoopbackIsm dev;
    auto mem = pages(65536);
    Result<DmbInfo> dmb = dev.registerDmb(mem, 65536);
    ASSERT_TRUE(dmb) << dmb.error().message();
    EXPECT_NE(dmb->token, 0u);
    EXPECT_EQ(dmb->data, mem.get());

    Result<DmbAttachment> peer = dev.attachDmb(dmb->token);
    ASSERT_TRUE(peer);
    EXPECT_EQ(peer->data(), mem.get()) << "the peer maps the owner's memory";
    EXPECT_EQ(peer->size(), 65536u);
    EXPECT_EQ(dev.attachCount(dmb->token), 1u);

    // Peer writes through the mapping, owner reads; and the other way round.
    std::memcpy(peer->data() + 32, "hello", 5);
    EXPECT_EQ(std::memcmp(mem.get() + 32, "hello", 5), 0);
    std::memcpy(mem.get() + 1000, "world", 5);
    EXPECT_EQ(std::memcmp(peer->data() + 1000, "world", 5), 0);

    peer->detach();
    EXPECT_EQ(dev.attachCount(dmb->token), 0u);
    EXPECT_TRUE(dev.unregisterDmb(dmb->token));
}

TEST(LoopbackIsm, MoveDataWritesAtTheOffsetAndSignals)
{
    std::vector<std::uint32_t> irqs;
    LoopbackIsm dev([&](std::uint32_t index, DmbToken) { irqs.push_back(index); });
    auto mem = pages(16384);
    Result<DmbInfo> dmb = dev.registerDmb(mem, 16384);
    ASSERT_TRUE(dmb);
    const auto data = pattern(300, 3);
    ASSERT_TRUE(dev.moveData(dmb->token, 100, data, false));
    EXPECT_EQ(std::memcmp(mem.get() + 100, data.data(), data.size()), 0);
    EXPECT_EQ(dev.signalCount(dmb->token), 0u);
    ASSERT_TRUE(dev.moveData(dmb->token, 0, std::span(data).first(32), true));
    ASSERT_TRUE(dev.signal(dmb->token));
    EXPECT_EQ(dev.signalCount(dmb->token), 2u);
    EXPECT_EQ(irqs, (std::vector<std::uint32_t>{dmb->index, dmb->index}));

    // Out of bounds: refused, nothing written.
    EXPECT_EQ(dev.moveData(dmb->token, 16384 - 10, data, false).error(), IsmErrc::OutOfBounds);
    EXPECT_EQ(dev.moveData(dmb->token, std::size_t{1} << 62, data, false).error(),
              IsmErrc::OutOfBounds);
    EXPECT_EQ(mem.get()[16383], std::byte{0});
    EXPECT_TRUE(dev.unregisterDmb(dmb->token));
}

TEST(LoopbackIsm, StaleTokenIsRejectedAfterUnregister)
{
    LoopbackIsm dev;
    Result<DmbInfo> first = dev.registerDmb(pages(16384), 16384);
    ASSERT_TRUE(first);
    const DmbToken stale = first->token;
    ASSERT_TRUE(dev.unregisterDmb(stale));
    // The slot is reused at once, under a new token.
    Result<DmbInfo> second = dev.registerDmb(pages(16384), 16384);
    ASSERT_TRUE(second);
    EXPECT_EQ(second->index, first->index);
    EXPECT_NE(second->token, stale);

    const std::byte b{1};
    EXPECT_EQ(dev.moveData(stale, 0, {&b, 1}, true).error(), IsmErrc::UnknownToken);
    EXPECT_EQ(dev.attachDmb(stale).error(), IsmErrc::UnknownToken);
    EXPECT_EQ(dev.unregisterDmb(stale).error(), IsmErrc::UnknownToken);
    EXPECT_EQ(dev.signal(stale).error(), IsmErrc::UnknownToken);
    EXPECT_EQ(dev.moveData(0, 0, {&b, 1}, false).error(), IsmErrc::UnknownToken);
    EXPECT_EQ(second->data[0], std::byte{0}) << "nothing landed in the new DMB";
    EXPECT_TRUE(dev.unregisterDmb(second->token));
}

TEST(LoopbackIsm, AttachmentOutlivesUnregister)
{
    LoopbackIsm dev;
    std::weak_ptr<std::byte> watch;
    DmbAttachment peer;
    {
        auto mem = pages(16384);
        watch = mem;
        Result<DmbInfo> dmb = dev.registerDmb(std::move(mem), 16384);
        ASSERT_TRUE(dmb);
        peer = std::move(dev.attachDmb(dmb->token)).value();
        ASSERT_TRUE(dev.unregisterDmb(dmb->token));
    }
    EXPECT_FALSE(watch.expired()) << "an attached peer keeps the memory";
    peer.data()[0] = std::byte{7}; // still valid memory
    peer.detach();
    EXPECT_TRUE(watch.expired());
}

// A device whose signal handler runs `onSignal(device, index, token)`; the
// handler may call the device. Shared, so a hung call keeps it alive.
struct HandlerDevice {
    std::function<void(LoopbackIsm&, std::uint32_t, DmbToken)> onSignal;
    LoopbackIsm dev{[this](std::uint32_t index, DmbToken token) { onSignal(dev, index, token); }};
};

TEST(LoopbackIsm, HandlerMayUnregisterItsOwnDmb)
{
    auto h = std::make_shared<HandlerDevice>();
    std::atomic<bool> unregistered{false};
    std::atomic<bool> registered{false};
    h->onSignal = [&](LoopbackIsm& dev, std::uint32_t, DmbToken token) {
        unregistered = bool(dev.unregisterDmb(token));
        // The device is not locked up meanwhile: another DMB can be had.
        registered = bool(dev.registerDmb(pages(16384), 16384));
    };
    auto mem = pages(16384);
    std::weak_ptr<std::byte> watch = mem;
    Result<DmbInfo> dmb = h->dev.registerDmb(std::move(mem), 16384);
    ASSERT_TRUE(dmb);
    const DmbToken token = dmb->token;
    auto signal = [h, token] { (void)h->dev.signal(token); };
    ASSERT_TRUE(finishesWithin(std::chrono::seconds(5), signal))
        << "a handler that unregisters its own DMB hangs";
    EXPECT_TRUE(unregistered);
    EXPECT_TRUE(registered);
    // The signal was the DMB's last user: on its way out it freed the slot.
    EXPECT_TRUE(watch.expired());
    EXPECT_EQ(h->dev.dmbCount(), 1u) << "only the DMB the handler registered";
    EXPECT_EQ(h->dev.signal(token).error(), IsmErrc::UnknownToken);
    EXPECT_EQ(h->dev.unregisterDmb(token).error(), IsmErrc::UnknownToken);
}

TEST(LoopbackIsm, UnregisterDoesNotWaitForARunningHandler)
{
    auto h = std::make_shared<HandlerDevice>();
    auto gate = std::make_shared<std::promise<void>>();
    std::shared_future<void> open = gate->get_future().share();
    auto inside = std::make_shared<std::promise<void>>();
    h->onSignal = [inside, open](LoopbackIsm&, std::uint32_t, DmbToken) {
        inside->set_value();
        (void)open.wait_for(std::chrono::seconds(10)); // bounded, should the test fail
    };
    auto mem = pages(16384);
    std::weak_ptr<std::byte> watch = mem;
    Result<DmbInfo> dmb = h->dev.registerDmb(std::move(mem), 16384);
    ASSERT_TRUE(dmb);
    const DmbToken token = dmb->token;
    std::thread writer([h, token] { (void)h->dev.signal(token); });
    inside->get_future().wait();

    // The handler is a user of the DMB: neither this unregister nor other
    // DMBs' registrations may wait for it.
    auto calls = [h, token] {
        EXPECT_TRUE(h->dev.unregisterDmb(token));
        Result<DmbInfo> other = h->dev.registerDmb(pages(16384), 16384);
        ASSERT_TRUE(other);
        EXPECT_TRUE(h->dev.unregisterDmb(other->token));
    };
    EXPECT_TRUE(finishesWithin(std::chrono::seconds(2), calls))
        << "unregister waited for a running signal handler";
    EXPECT_FALSE(watch.expired()) << "the handler's signal still uses the memory";
    EXPECT_EQ(h->dev.dmbCount(), 1u) << "the slot is not free before its last user leaves";
    gate->set_value();
    writer.join();
    EXPECT_TRUE(watch.expired()) << "the last user freed it";
    EXPECT_EQ(h->dev.dmbCount(), 0u);
}

TEST(LoopbackIsm, AttachmentOutlivesTheDevice)
{
    auto dev = std::make_unique<LoopbackIsm>();
    auto mem = pages(16384);
    std::weak_ptr<std::byte> watch = mem;
    Result<DmbInfo> dmb = dev->registerDmb(mem, 16384);
    ASSERT_TRUE(dmb);
    DmbAttachment peer = std::move(dev->attachDmb(dmb->token)).value();
    DmbAttachment moved = std::move(dev->attachDmb(dmb->token)).value();
    mem.reset();
    dev.reset();
    // The mapping is still the DMB's memory, and detaching calls no dead device.
    peer.data()[5] = std::byte{9};
    EXPECT_EQ(moved.data()[5], std::byte{9});
    DmbAttachment other = std::move(moved);
    peer.detach();
    EXPECT_FALSE(watch.expired());
    other = DmbAttachment{};
    EXPECT_TRUE(watch.expired());
}

TEST(LoopbackIsm, The5001stDmbIsAClearError)
{
    LoopbackIsm dev;
    auto mem = pages(16384); // one buffer may back many DMBs here
    std::vector<DmbToken> tokens;
    for (std::uint32_t i = 0; i < LoopbackIsm::kMaxDmbs; ++i) {
        Result<DmbInfo> dmb = dev.registerDmb(mem, 16384);
        ASSERT_TRUE(dmb) << i;
        tokens.push_back(dmb->token);
    }
    EXPECT_EQ(dev.dmbCount(), 5000u);
    Result<DmbInfo> extra = dev.registerDmb(mem, 16384);
    ASSERT_FALSE(extra);
    EXPECT_EQ(extra.error(), IsmErrc::DmbLimitReached);
    EXPECT_NE(extra.error().message().find("DMB"), std::string::npos);
    std::sort(tokens.begin(), tokens.end());
    EXPECT_EQ(std::adjacent_find(tokens.begin(), tokens.end()), tokens.end()) << "unique tokens";
    ASSERT_TRUE(dev.unregisterDmb(tokens[42]));
    EXPECT_TRUE(dev.registerDmb(mem, 16384)) << "a freed slot can be had again";
}

TEST(LoopbackIsm, SmcDPoolMakesRmbsDmbs)
{
    LoopbackIsm dev;
    IsmRegistrar registrar(dev);
    PoolConfig config;
    config.tech = Tech::SmcD;
    auto pool = std::move(BufferPool::create(config, registrar)).value();

    Result<BufferRef> rmb = pool->acquire(BufferKind::Rmb, 65536);
    Result<BufferRef> snd = pool->acquire(BufferKind::Sndbuf, 65536);
    ASSERT_TRUE(rmb && snd);
    const DmbToken token = (*rmb)->dmbToken();
    EXPECT_NE(token, 0u);
    EXPECT_EQ((*snd)->dmbToken(), 0u) << "sndbufs are plain memory";
    EXPECT_EQ(dev.dmbCount(), 1u);

    // The peer writes into the RMB by token; the owner sees it in place.
    const auto data = pattern(64, 9);
    ASSERT_TRUE(dev.moveData(token, 32, data, true));
    EXPECT_EQ(std::memcmp(rmb->data() + 32, data.data(), data.size()), 0);

    // Reuse keeps the DMB: same token, no new registration.
    ASSERT_TRUE(pool->release(*rmb));
    Result<BufferRef> again = pool->acquire(BufferKind::Rmb, 65536);
    ASSERT_TRUE(again);
    EXPECT_EQ((*again)->dmbToken(), token);
    EXPECT_EQ(dev.dmbCount(), 1u);
    ASSERT_TRUE(pool->release(*again));
    ASSERT_TRUE(pool->release(*snd));
    pool.reset();
    EXPECT_EQ(dev.dmbCount(), 0u) << "pool teardown unregisters its DMBs";
    EXPECT_EQ(dev.moveData(token, 0, data, false).error(), IsmErrc::UnknownToken);
}

TEST(LoopbackIsm, SmcDPoolReportsTheDmbLimit)
{
    LoopbackIsm dev;
    IsmRegistrar registrar(dev);
    PoolConfig config;
    config.tech = Tech::SmcD;
    auto pool = std::move(BufferPool::create(config, registrar)).value();
    std::vector<BufferRef> held;
    for (std::uint32_t i = 0; i < LoopbackIsm::kMaxDmbs; ++i) {
        Result<BufferRef> b = pool->acquire(BufferKind::Rmb, 16384);
        ASSERT_TRUE(b) << i;
        held.push_back(*b);
    }
    Result<BufferRef> extra = pool->acquire(BufferKind::Rmb, 16384);
    ASSERT_FALSE(extra);
    EXPECT_EQ(extra.error(), IsmErrc::DmbLimitReached);
    PoolStats s = pool->stats();
    EXPECT_EQ(s.rmb.descriptors, LoopbackIsm::kMaxDmbs);
    EXPECT_EQ(s.rmb.freed, 1u) << "the buffer the device refused is freed";
    for (const BufferRef& b : held)
        ASSERT_TRUE(pool->release(b));
}

} // namespace
} // namespace smc
