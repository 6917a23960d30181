// SPDX-License-Identifier: MIT
// The in-process LLC channel: ordered delivery both ways, injected faults, link down once.
#include "smc/transport/inproc_channel.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace smc
{
namespace
{

using namespace std::chrono_literals;

struct Inbox {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::vector<std::byte>> got;
    std::atomic<int> downs{0};

    LinkChannel::Callbacks callbacks()
    {
        return {[this](std::vector<std::byte> m) {
                    {
                        std::lock_guard lock(mutex);
                        got.push_back(std::move(m));
                    }
                    cv.notify_all();
                },
                [this] {
                    ++downs;
                    cv.notify_all();
                }};
    }
    bool waitCount(std::size_t n)
    {
        std::unique_lock lock(mutex);
        return cv.wait_for(lock, 5s, [&] { return got.size() >= n; });
    }
    bool waitDown()
    {
        std::unique_lock lock(mutex);
        return cv.wait_for(lock, 5s, [&] { return downs.load() > 0; });
    }
};

std::vector<std::byte> msg(std::uint8_t n)
{
    return std::vector<std::byte>(44, std::byte{n});
}

// As on RC: a message longer than the sender's slots is refused (message_size), and one that
// fits the sender but not the peer's slots fails the receive, which takes the link down.
TEST(InprocChannel, MessageLimitsAreTheSlotsOfBothEnds)
{
    Inbox atA, atB;
    auto [a, b] = InprocChannel::pair();
    a->setMaxMessage(kLongMessages); // a v2 end facing a v1 one
    a->start(atA.callbacks());
    b->start(atB.callbacks());
    const std::vector<std::byte> v2(72, std::byte{7});
    EXPECT_EQ(b->send(v2).error(), std::errc::message_size);
    EXPECT_EQ(a->send(std::vector<std::byte>(kLongMessages + 1)).error(), std::errc::message_size);
    ASSERT_TRUE(a->send(msg(1)));
    ASSERT_TRUE(atB.waitCount(1));
    EXPECT_TRUE(a->isUp());
    (void)a->send(v2); // the sender cannot tell: the receive fails at the far end
    ASSERT_TRUE(atA.waitDown());
    ASSERT_TRUE(atB.waitDown());
    EXPECT_EQ(atB.got.size(), 1u);
}

TEST(InprocChannel, DeliversInOrderBothWays)
{
    Inbox atA, atB; // outlive the channels, whose threads call into them
    auto [a, b] = InprocChannel::pair();
    a->start(atA.callbacks());
    b->start(atB.callbacks());
    for (std::uint8_t i = 1; i <= 20; ++i) {
        ASSERT_TRUE(a->send(msg(i)));
        ASSERT_TRUE(b->send(msg(100 + i)));
    }
    ASSERT_TRUE(atB.waitCount(20) && atA.waitCount(20));
    for (std::uint8_t i = 0; i < 20; ++i) {
        EXPECT_EQ(atB.got[i], msg(i + 1));
        EXPECT_EQ(atA.got[i], msg(101 + i));
    }
}

TEST(InprocChannel, FaultsDropDuplicateCorruptDelay)
{
    Inbox atB;
    auto [a, b] = InprocChannel::pair();
    a->start({});
    b->start(atB.callbacks());
    a->faults().drop = 1;
    ASSERT_TRUE(a->send(msg(1))) << "a dropped message looks sent";
    a->faults().duplicate = 1;
    ASSERT_TRUE(a->send(msg(2)));
    a->faults().corrupt = 1;
    ASSERT_TRUE(a->send(msg(3)));
    ASSERT_TRUE(atB.waitCount(3));
    EXPECT_EQ(atB.got[0], msg(2));
    EXPECT_EQ(atB.got[1], msg(2));
    EXPECT_EQ(atB.got[2][0], std::byte{0x0f});
    a->faults().delayMs = 100;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(a->send(msg(4)));
    ASSERT_TRUE(atB.waitCount(4));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
}

TEST(InprocChannel, KillTakesBothEndsDownOnce)
{
    Inbox atA, atB; // outlive the channels, whose threads call into them
    auto [a, b] = InprocChannel::pair();
    a->start(atA.callbacks());
    b->start(atB.callbacks());
    a->shutdown();
    a->shutdown();
    ASSERT_TRUE(atA.waitDown() && atB.waitDown());
    EXPECT_FALSE(a->isUp());
    EXPECT_EQ(b->send(msg(1)).error(), std::errc::not_connected);
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(atA.downs.load(), 1);
    EXPECT_EQ(atB.downs.load(), 1);
}

// A write already past the link check when the peer's failover takes the link down and
// unregisters its buffers from it: the NIC refuses the rkey, but as on RC (a flushed write)
// the writer hears not_connected, which failover answers by writing again on another link.
// A refusal on a live link is the peer's remote access error: permission_denied, link down.
TEST(InprocChannel, AWriteRefusedAfterTheLinkWentDownIsNotConnected)
{
    Inbox atA, atB;
    auto [a, b] = InprocChannel::pair();
    a->start(atA.callbacks());
    b->start(atB.callbacks());
    const std::byte data[8]{};
    InprocChannel* peer = b.get();
    a->setRemoteWriter([peer](std::uint32_t, std::uint64_t, const void*, std::size_t) {
        peer->shutdown(); // the peer's failover, between our check and the NIC
        return false;
    });
    EXPECT_EQ(a->write(data, sizeof data, 1, 0, 2).error(), std::errc::not_connected);

    auto [c, d] = InprocChannel::pair();
    c->start(atA.callbacks());
    d->start(atB.callbacks());
    c->setRemoteWriter(
        [](std::uint32_t, std::uint64_t, const void*, std::size_t) { return false; });
    EXPECT_EQ(c->write(data, sizeof data, 1, 0, 2).error(), std::errc::permission_denied);
    EXPECT_FALSE(c->isUp());
}

TEST(InprocChannel, DestroyingOneEndTakesTheOtherDown)
{
    Inbox atB;
    auto [a, b] = InprocChannel::pair();
    a->start({});
    b->start(atB.callbacks());
    a.reset();
    ASSERT_TRUE(atB.waitDown());
    EXPECT_EQ(b->send(msg(1)).error(), std::errc::not_connected);
}

} // namespace
} // namespace smc
