// SPDX-License-Identifier: MIT
// SmcrConnection sends posted, not waited for: completions give the sndbuf's room back, push
// what autocorking held meanwhile, and decide what failover writes again.
#include "smc/conn/smcr_connection.h"

#include <array>
#include <atomic>
#include <cstring>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "tests/libtest/link_groups.h"
#include "tests/libtest/smcr_conns.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using namespace test::smcr;

constexpr std::uint32_t kOwnSeed = 9;
constexpr std::size_t kAutocorkBytes = 65536;

class SmcrCompletions : public ConnectionTest
{
protected:
    explicit SmcrCompletions(unsigned links = 1) : ConnectionTest(links) {}
    // The client's end of its connection's link, its completions held as RDMA's come later.
    InprocChannel& holdClientCompletions()
    {
        InprocChannel& end = clientEnd(c.cc->link());
        end.holdCompletions(true);
        return end;
    }
    // close() of the client on a thread of its own, which sets `closed` once it returned.
    std::thread closeClient(std::atomic<bool>& closed)
    {
        return std::thread([this, &closed] {
            c.client->close();
            closed = true;
        });
    }
    void TearDown() override
    {
        if (c.cc)
            for (const LinkInfo& l : p.client.group->links()) {
                InprocChannel& end = clientEnd(l.slot);
                end.holdCompletions(false);
                end.releaseCompletions();
            }
        ConnectionTest::TearDown();
    }
};

// Linux's rule for a lone sender: the first send goes at once; small ones after it wait in
// the sndbuf while its CDC is on its way, and its completion pushes them, in one WRITE.
TEST_F(SmcrCompletions, ALoneSendersSmallSendsWaitForTheCdcOnItsWay)
{
    ASSERT_TRUE(opened(65536, 65536, kAutocorkBytes));
    InprocChannel& end = holdClientCompletions();
    const std::uint64_t writes = end.writes();
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 0, 64, false, kOwnSeed));
    ASSERT_TRUE(test::eventually([&] { return c.server->unread() == 64; })) << "never corked";
    for (int i = 1; i <= 10; ++i)
        ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 64 * i, 64, false, kOwnSeed));
    EXPECT_EQ(end.writes(), writes + 1) << "held while the first CDC is on its way";
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(c.server->unread(), 64u);

    end.releaseCompletions();
    ASSERT_TRUE(test::eventually([&] { return c.server->unread() == 704; })) << "pushed";
    EXPECT_EQ(end.writes(), writes + 2) << "the ten in one WRITE";
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 0, 704, kOwnSeed));
}

// What the sender holds back itself (MSG_MORE, TCP_CORK) a completion does not push.
TEST_F(SmcrCompletions, BytesTheSenderHoldsWaitPastACompletion)
{
    ASSERT_TRUE(opened(65536, 65536, kAutocorkBytes));
    InprocChannel& end = holdClientCompletions();
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 0, 100, false, kOwnSeed));
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 100, 100, /*hold=*/true, kOwnSeed));
    end.releaseCompletions();
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(c.server->unread(), 100u);
    ASSERT_TRUE(c.client->flush());
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 0, 200, kOwnSeed));
}

// The sndbuf's room comes back only with completions: full of bytes on their way, the
// connection is not writable, a non-blocking send says try again, a blocking one waits.
TEST_F(SmcrCompletions, ASndbufFullOfBytesOnTheirWayWaitsForTheirCompletion)
{
    ASSERT_TRUE(opened(65536, 16384));
    InprocChannel& end = holdClientCompletions();
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 0, 8192, false, kOwnSeed));
    EXPECT_TRUE(c.client->writable());
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 8192, 8192, false, kOwnSeed));
    EXPECT_FALSE(c.client->writable()) << "every byte of the sndbuf on its way";
    std::array<std::byte, 100> b{};
    Result<std::size_t> r = c.client->send(b, soon(), /*nonBlocking=*/true, false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::resource_unavailable_try_again);

    std::atomic<bool> sent{false};
    std::thread sender([&] {
        sendRange(*c.client, 16384, 1000, false, kOwnSeed);
        sent = true;
    });
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 0, 16384, kOwnSeed)); // announced, landed
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(sent) << "no completion yet";
    end.holdCompletions(false);
    end.releaseCompletions();
    sender.join();
    EXPECT_TRUE(c.client->writable());
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 16384, 1000, kOwnSeed));
}

// close() returns the sndbuf to the pool only once what was posted (the bytes sent before,
// the held ones its CDC announces) completed.
TEST_F(SmcrCompletions, CloseWaitsForWhatIsOnItsWay)
{
    ASSERT_TRUE(opened());
    InprocChannel& end = holdClientCompletions();
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 0, 1000, false, kOwnSeed));
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 1000, 500, /*hold=*/true, kOwnSeed));
    std::atomic<bool> closed{false};
    std::thread closer = closeClient(closed);
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(closed) << "its data and closing CDCs are on their way";
    end.releaseCompletions();
    closer.join();
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 0, 1500, kOwnSeed));
    ASSERT_NO_FATAL_FAILURE(expectEnd(*c.server));
}

// The second to close: the peer's close took its RMB's rtokens away, and our closing CDC,
// which writes nothing, needs none; it is posted and waited for like any other.
TEST_F(SmcrCompletions, TheSecondToCloseWaitsForItsCdcToo)
{
    ASSERT_TRUE(opened());
    c.server->close(); // returns once our side answered its DELETE_RKEY
    ASSERT_NO_FATAL_FAILURE(expectEnd(*c.client, soon(10s)));
    InprocChannel& end = holdClientCompletions();
    std::atomic<bool> closed{false};
    std::thread closer = closeClient(closed);
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(closed) << "its closing CDC is on its way";
    end.releaseCompletions();
    closer.join();
}

// Once the TCP connection ended, the peer is gone or closed: close() does not wait for its
// closing CDC (the link to a dead peer would answer only when its retries ran out).
TEST_F(SmcrCompletions, CloseAfterTheTcpConnectionEndedDoesNotWaitForItsCdc)
{
    ASSERT_TRUE(opened());
    InprocChannel& end = holdClientCompletions();
    c.client->peerGone();
    std::atomic<bool> closed{false};
    std::thread closer = closeClient(closed);
    EXPECT_TRUE(test::eventually([&] { return closed.load(); }, 5s)) << "its CDC is still out";
    end.releaseCompletions();
    closer.join();
}

class SmcrCompletionsFailover : public SmcrCompletions
{
protected:
    SmcrCompletionsFailover() : SmcrCompletions(2) {}
};

// Bytes whose CDC was lost with its link never completed: failover writes them again on the
// next link and announces them there, with no further send.
TEST_F(SmcrCompletionsFailover, BytesNoCompletionSaidLandedAreWrittenAgain)
{
    ASSERT_TRUE(opened());
    const unsigned first = c.cc->link();
    InprocChannel& end = holdClientCompletions();
    end.faults().drop = 1; // the CDC: the peer never hears of these bytes on this link
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 0, 3000, false, kOwnSeed));
    std::memset(c.sc->rmb.data(), 0, 3000); // nor did its WRITE land, as far as anyone knows
    ASSERT_TRUE(p.client.group->breakLink(first));
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 0, 3000, kOwnSeed));
    EXPECT_NE(c.cc->link(), first);
    EXPECT_GE(c.client->stats().moves, 1u);
    EXPECT_GE(c.server->stats().validations, 1u);
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 3000, 500, false, kOwnSeed));
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 3000, 500, kOwnSeed));
}

// close() waits for its own CDC too, which announces no new byte: when the link loses it,
// close() sees failover through and the peer still gets the orderly end, not a reset.
TEST_F(SmcrCompletionsFailover, ACloseCdcTheLinkLostGoesAgainAfterFailover)
{
    ASSERT_TRUE(opened());
    const unsigned first = c.cc->link();
    InprocChannel& end = holdClientCompletions();
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 0, 1000, false, kOwnSeed));
    end.releaseCompletions(); // the bytes landed
    end.faults().drop = 1;    // the closing CDC will not
    std::atomic<bool> closed{false};
    std::thread closer = closeClient(closed);
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(closed) << "its CDC is on its way";
    ASSERT_TRUE(p.client.group->breakLink(first));
    closer.join();
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 0, 1000, kOwnSeed));
    ASSERT_NO_FATAL_FAILURE(expectEnd(*c.server, soon(10s)));
}

// A sndbuf larger than the peer's ring, none of its completions told when the link breaks:
// what the peer consumed surely landed, so failover writes again only the rest, which fits
// the ring once; every byte arrives in order.
TEST_F(SmcrCompletionsFailover, FailoverWritesAgainOnlyWhatThePeerHasNotConsumed)
{
    ASSERT_TRUE(opened(16384, 65536));
    const unsigned first = c.cc->link();
    holdClientCompletions();
    std::thread reader([&] { expectRange(*c.server, 0, 60000, kOwnSeed); });
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 0, 60000, false, kOwnSeed));
    reader.join();
    ASSERT_TRUE(p.client.group->breakLink(first));
    ASSERT_TRUE(test::eventually([&] { return c.client->writable(); })) << "failover resent";
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 60000, 1000, false, kOwnSeed));
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 60000, 1000, kOwnSeed));
    EXPECT_GE(c.server->stats().validations, 1u);
}

} // namespace
} // namespace smc
