// SPDX-License-Identifier: MIT
// Corking (seed 001): MSG_MORE, cork, nodelay and autocorking on SMC-D, SMC-R and TCP.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "smc/socket/socket.h"
#include "tests/libtest/smcr_stacks.h"
#include "tests/libtest/socket_stream.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
namespace stacks = test::smcr_stacks;

// One pair of stacks and a connection between them on the transport under test.
class Cork : public ::testing::TestWithParam<Transport>
{
protected:
    void SetUp() override
    {
        const Transport t = GetParam();
        fabric_ = std::make_unique<stacks::Fabric>();
        stacks::Fabric* f = t == Transport::SmcR ? fabric_.get() : nullptr;
        server_ = stacks::makeStack(f, stacks::kServerId);
        client_ = stacks::makeStack(f, stacks::kClientId);
        SocketOptions o = t == Transport::SmcR ? stacks::smcrOnly() : SocketOptions{};
        o.mode = t == Transport::SmcD ? Mode::SmcD : t == Transport::SmcR ? Mode::SmcR : Mode::Tcp;
        o.recvTimeout = 10s;
        o.sendTimeout = 10s;
        pair_ = test::connectPair(*server_, *client_, o, o);
        ASSERT_EQ(pair_.client.transport(), t);
    }

    // What the server can read now, without waiting.
    std::size_t readableNow()
    {
        pair_.server.setNonBlocking(true);
        std::array<std::byte, 4096> buf;
        std::size_t got = 0;
        for (;;) {
            Result<std::size_t> n = pair_.server.recv(buf);
            if (!n || *n == 0)
                break;
            got += *n;
        }
        pair_.server.setNonBlocking(false);
        return got;
    }

    // Reads exactly n bytes (blocking, up to the receive timeout).
    std::size_t readExactly(std::size_t n)
    {
        std::vector<std::byte> buf(n);
        std::size_t got = 0;
        while (got < n) {
            Result<std::size_t> r = pair_.server.recv(std::span(buf).subspan(got));
            if (!r || *r == 0)
                break;
            got += *r;
        }
        return got;
    }

    bool smc() const { return GetParam() != Transport::Tcp; }

    std::unique_ptr<stacks::Fabric> fabric_;
    std::unique_ptr<SmcStack> server_, client_;
    test::SocketPair pair_;
};

const std::array<std::byte, 100> kHundred{};

TEST_P(Cork, MsgMoreHoldsUntilASendWithoutIt)
{
    ASSERT_EQ(pair_.client.send(kHundred, SendFlags::More).value(), 100u);
    ASSERT_EQ(pair_.client.send(kHundred, SendFlags::More).value(), 100u);
    if (smc()) { // TCP may send a MSG_MORE segment when it likes; SMC holds until told
        EXPECT_EQ(readableNow(), 0u);
    }
    ASSERT_EQ(pair_.client.send(kHundred).value(), 100u);
    EXPECT_EQ(readExactly(300), 300u);
}

TEST_P(Cork, CorkHoldsUntilUncorked)
{
    ASSERT_TRUE(pair_.client.setCork(true));
    for (int i = 0; i < 5; ++i)
        ASSERT_EQ(pair_.client.send(kHundred).value(), 100u);
    if (smc()) {
        EXPECT_EQ(readableNow(), 0u);
    }
    ASSERT_TRUE(pair_.client.setCork(false));
    EXPECT_EQ(readExactly(500), 500u);
}

TEST_P(Cork, NoDelayFlushesWhatIsHeld)
{
    ASSERT_EQ(pair_.client.send(kHundred, SendFlags::More).value(), 100u);
    if (smc()) {
        EXPECT_EQ(readableNow(), 0u);
    }
    ASSERT_TRUE(pair_.client.setNoDelay(true));
    EXPECT_EQ(readExactly(100), 100u);
}

TEST_P(Cork, ShutdownAnnouncesHeldBytesBeforeTheEnd)
{
    ASSERT_TRUE(pair_.client.setCork(true));
    ASSERT_EQ(pair_.client.send(kHundred).value(), 100u);
    ASSERT_TRUE(pair_.client.shutdown(Shutdown::Write));
    EXPECT_EQ(readExactly(100), 100u);
    std::array<std::byte, 8> more;
    EXPECT_EQ(pair_.server.recv(more).value(), 0u); // then the end
}

// A corked send that fills the peer's ring is announced anyway: only the peer's reading can
// make room, so holding it would stall both ends.
TEST_P(Cork, AFullRingIsAnnouncedThoughCorked)
{
    if (!smc())
        GTEST_SKIP() << "a TCP send buffer is not the peer's ring";
    ASSERT_TRUE(pair_.client.setCork(true));
    std::vector<std::byte> big(1 << 20);
    Result<std::size_t> n = pair_.client.send(big); // takes what fits in the peer's ring
    ASSERT_TRUE(n) << n.error().message();
    ASSERT_LT(*n, big.size());
    EXPECT_EQ(readExactly(*n), *n);
}

// Eight threads send on one socket at once: sends queued behind each other leave the
// announcing to the last, and once every send returned every byte is readable, with no
// flush, cork change or close (the last send of a queue is never held back).
TEST_P(Cork, AutocorkNeverHoldsBackTheLastSend)
{
    constexpr int kThreads = 8, kSends = 2000;
    constexpr std::size_t kBytes = 64;
    std::vector<std::thread> senders;
    std::atomic<bool> failed{false};
    for (int t = 0; t < kThreads; ++t)
        senders.emplace_back([&] {
            std::array<std::byte, kBytes> msg{};
            for (int i = 0; i < kSends; ++i) {
                std::span<const std::byte> left(msg);
                while (!left.empty()) {
                    Result<std::size_t> n = pair_.client.send(left);
                    if (!n) {
                        failed = true;
                        return;
                    }
                    left = left.subspan(*n);
                }
            }
        });
    std::atomic<std::size_t> got{0};
    std::thread reader([&] { got = readExactly(std::size_t{kThreads} * kSends * kBytes); });
    for (auto& t : senders)
        t.join();
    reader.join();
    EXPECT_FALSE(failed);
    EXPECT_EQ(got.load(), std::size_t{kThreads} * kSends * kBytes);
}

INSTANTIATE_TEST_SUITE_P(Transports, Cork,
                         ::testing::Values(Transport::SmcD, Transport::SmcR, Transport::Tcp),
                         [](const auto& p) {
                             return p.param == Transport::SmcD   ? "SmcD"
                                    : p.param == Transport::SmcR ? "SmcR"
                                                                 : "Tcp";
                         });

} // namespace
} // namespace smc
