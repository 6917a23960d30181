// SPDX-License-Identifier: MIT
// SmcrConnection over an in-process link group pair: streams, wraps, close, abort, hostile CDCs,
// non-blocking calls, buffers back in the pool (failover: smcr_failover_test.cpp).
#include "smc/conn/smcr_connection.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "smc/cdc/cdc_messages.h"
#include "tests/libtest/link_groups.h"
#include "tests/libtest/smcr_conns.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using namespace test::smcr;

class SmcrConnections : public ConnectionTest
{
};

TEST_F(SmcrConnections, StreamsOneWayWithEveryByteInPlace)
{
    ASSERT_TRUE(opened(65536, 16384)); // a sndbuf smaller than the peer's ring: staged chunks
    std::atomic<bool> failed{false};
    const std::uint64_t total = 64 * kMiB;
    std::thread tx([&] { pump(*c.client, total, 1, failed); });
    EXPECT_EQ(drain(*c.server, total, 1, failed), total);
    tx.join();
    ASSERT_TRUE(c.client->shutdownWrite());
    ASSERT_NO_FATAL_FAILURE(expectEnd(*c.server)) << "done_writing is the end of the stream";
    ConnectionInfo info;
    c.server->fillInfo(info);
    EXPECT_EQ(info.bytesReceived, total);
}

TEST_F(SmcrConnections, StreamsBothWaysAtOnce)
{
    ASSERT_TRUE(opened());
    std::atomic<bool> failed{false};
    const std::uint64_t total = 64 * kMiB;
    std::uint64_t toServer = 0, toClient = 0;
    std::thread a([&] { pump(*c.client, total, 1, failed); });
    std::thread b([&] { pump(*c.server, total, 2, failed); });
    std::thread d([&] { toClient = drain(*c.client, total, 2, failed); });
    toServer = drain(*c.server, total, 1, failed);
    a.join();
    b.join();
    d.join();
    EXPECT_EQ(toServer, total);
    EXPECT_EQ(toClient, total);
}

TEST_F(SmcrConnections, SmallAndOddSizesAcrossTheWrap)
{
    ASSERT_TRUE(opened(16384, 16384));
    const std::size_t ring = c.sc->rmb.size();
    std::vector<std::byte> out(ring), in(ring);
    std::uint64_t pos = 0;
    for (std::size_t n :
         {std::size_t{1}, std::size_t{3}, std::size_t{4095}, ring - 1, ring, std::size_t{7},
          ring / 2 + 1, std::size_t{13}, ring - 5, std::size_t{2}}) {
        for (int round = 0; round < 5; ++round) {
            for (std::size_t i = 0; i < n; ++i)
                out[i] = at(pos + i, 7);
            // One thread: each side goes on when it can (the ring may hold less than n).
            std::size_t sent = 0, got = 0;
            while (got < n) {
                bool moved = false;
                if (sent < n) {
                    Result<std::size_t> r = c.client->send(std::span(out).subspan(sent, n - sent),
                                                           soon(), true, /*hold=*/false);
                    ASSERT_TRUE(r || r.error() == std::errc::resource_unavailable_try_again)
                        << r.error().message();
                    if (r) {
                        sent += *r;
                        moved = true;
                    }
                }
                Result<std::size_t> r =
                    c.server->recv(std::span(in).subspan(got, n - got), soon(), true);
                ASSERT_TRUE(r || r.error() == std::errc::resource_unavailable_try_again)
                    << r.error().message();
                if (r) {
                    ASSERT_GT(*r, 0u);
                    got += *r;
                    moved = true;
                }
                if (!moved)
                    std::this_thread::yield(); // a CDC is on its way
            }
            for (std::size_t i = 0; i < n; ++i)
                ASSERT_EQ(in[i], at(pos + i, 7)) << "size " << n << " byte " << i;
            pos += n;
        }
    }
    ConnectionInfo info;
    c.client->fillInfo(info);
    EXPECT_GT(info.producerWrap, 0) << "the cursors went round the ring";
}

// RDMA WRITEs the client's end of the (one) link put on the wire.
std::uint64_t clientWrites(Pair& p)
{
    return p.fabric().channel(p.fabric().lastQpn() + 0x10000)->writes();
}

// Held sends wait in the sndbuf and leave in one RDMA WRITE with the CDC that pushes them; a
// sndbuf full of held bytes is written (not announced) to make room, and across the sndbuf's
// wrap and the peer ring's every byte lands in its place.
TEST_F(SmcrConnections, HeldSendsLeaveInOneWriteWithTheirCdc)
{
    ASSERT_TRUE(opened(65536, 16384)); // a sndbuf a quarter of the peer's ring
    constexpr std::uint32_t kSeed = 5;
    std::uint64_t pos = 0; // where the next send starts in the stream
    const auto sendAt = [&](std::size_t n, bool hold) {
        sendRange(*c.client, pos, n, hold, kSeed);
        pos += n;
    };

    const std::uint64_t before = clientWrites(p);
    for (int i = 0; i < 16; ++i)
        ASSERT_NO_FATAL_FAILURE(sendAt(100, /*hold=*/true));
    EXPECT_EQ(clientWrites(p), before) << "held: nothing on the wire";
    EXPECT_FALSE(c.server->readable());
    ASSERT_NO_FATAL_FAILURE(sendAt(100, /*hold=*/false));
    EXPECT_EQ(clientWrites(p), before + 1) << "17 sends, one RDMA WRITE";
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 0, 1700, kSeed));

    // 3 x 7000 held bytes fill the 16 KiB sndbuf: the first ones are written to make room,
    // still unannounced; the push writes the rest across the sndbuf's wrap.
    for (int i = 0; i < 3; ++i)
        ASSERT_NO_FATAL_FAILURE(sendAt(7000, /*hold=*/true));
    EXPECT_GT(clientWrites(p), before + 1) << "the full sndbuf was written";
    EXPECT_FALSE(c.server->readable()) << "but not announced";
    ASSERT_NO_FATAL_FAILURE(sendAt(10, /*hold=*/false));
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 1700, 21010, kSeed));

    // Round the peer's ring, each push a different size.
    for (std::size_t n : {std::size_t{40000}, std::size_t{9}, std::size_t{16384}, std::size_t{3}}) {
        const std::uint64_t from = pos;
        ASSERT_NO_FATAL_FAILURE(sendAt(n / 2 + 1, /*hold=*/true));
        ASSERT_NO_FATAL_FAILURE(sendAt(n / 2, /*hold=*/false));
        ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, from, pos - from, kSeed));
    }
    ConnectionInfo info;
    c.client->fillInfo(info);
    EXPECT_GT(info.producerWrap, 0) << "the cursors went round the ring";
}

TEST_F(SmcrConnections, ShutdownWriteAndClose)
{
    ASSERT_TRUE(opened());
    ASSERT_TRUE(c.client->shutdownWrite());
    std::array<std::byte, 8> b{};
    Result<std::size_t> r = c.server->recv(b, soon(), false);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 0u);
    Result<std::size_t> s = c.client->send(b, soon(), false, /*hold=*/false);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error(), std::errc::broken_pipe);
    // The other way still works, half closed.
    ASSERT_TRUE(c.server->send(b, soon(), false, /*hold=*/false));
    r = c.client->recv(b, soon(), false);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, b.size());
    c.server->close(); // nothing unread: peer_conn_closed
    r = c.client->recv(b, soon(), false);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, 0u);
    r = c.client->recv(b, soon(), false);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 0u) << "the end of the stream stays";
    r = c.server->recv(b, soon(), false);
    EXPECT_EQ(r.error(), std::errc::not_connected);
    c.client->close();
}

TEST_F(SmcrConnections, CloseWithUnreadDataAbortsThePeer)
{
    ASSERT_TRUE(opened());
    std::array<std::byte, 100> b{};
    ASSERT_TRUE(c.client->send(b, soon(), false, /*hold=*/false));
    ASSERT_TRUE(test::eventually([&] { return c.server->readable(); }));
    c.server->close(); // 100 bytes unread: abort
    ASSERT_TRUE(test::eventually([&] {
        Result<std::size_t> r = c.client->send(b, soon(), true, /*hold=*/false);
        return !r && r.error() == std::errc::connection_reset;
    }));
    Result<std::size_t> r = c.client->recv(b, soon(), false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    c.client->close();
}

TEST_F(SmcrConnections, PeerGoneWithoutACloseIsAResetAfterTheGrace)
{
    ASSERT_TRUE(opened());
    std::atomic<bool> done{false};
    std::error_code seen;
    std::thread waiter([&] {
        std::array<std::byte, 8> b{};
        Result<std::size_t> r = c.server->recv(b, soon(), false);
        if (!r)
            seen = r.error();
        done = true;
    });
    c.server->peerGone(); // the TCP connection ended, and no close comes over the link
    waiter.join();
    EXPECT_EQ(seen, std::errc::connection_reset);
    EXPECT_TRUE(c.server->readable());
}

// The TCP FIN overtakes the peer's last CDCs (they come over the link, on other threads):
// here it comes before the peer even sends them. An orderly close stays one: every byte,
// then the end of the stream, not a reset.
TEST_F(SmcrConnections, PeerGoneBeforeTheClosingCdcsIsStillAnOrderlyEnd)
{
    ASSERT_TRUE(opened());
    c.server->peerGone();                       // the FIN, first
    constexpr std::uint64_t kBytes = 48 * 1024; // fits the ring: the send does not wait
    std::atomic<bool> failed{false};
    pump(*c.client, kBytes, 7, failed);
    ASSERT_FALSE(failed);
    c.client->close(); // nothing unread: peer_conn_closed, after the data's CDC
    EXPECT_EQ(drain(*c.server, kBytes, 7, failed), kBytes);
    std::array<std::byte, 8> b{};
    Result<std::size_t> r = c.server->recv(b, soon(), false);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, 0u);
    c.server->close();
}

TEST_F(SmcrConnections, ACursorBeyondTheRingAbortsAndCorruptsNothing)
{
    ASSERT_TRUE(opened());
    std::array<std::byte, 100> good;
    for (std::size_t i = 0; i < good.size(); ++i)
        good[i] = at(i, 3);
    ASSERT_TRUE(c.client->send(good, soon(), false, /*hold=*/false));
    ASSERT_TRUE(test::eventually([&] { return c.server->readable(); }));
    // A forged CDC on the client's link: producer far beyond the server's ring.
    cdc::CdcMessage forged;
    forged.seq = 1000;
    forged.token = c.sc->token;
    forged.producer = {0, static_cast<std::uint32_t>(c.sc->rmb.size() + 5)};
    ASSERT_TRUE(p.client.group->sendCdc(*c.cc, cdc::encodeSmcr(forged)));
    ASSERT_TRUE(test::eventually([&] {
        ConnectionInfo info;
        c.server->fillInfo(info);
        return info.state == "CLOSED";
    }));
    std::array<std::byte, 4096> in{};
    Result<std::size_t> r = c.server->recv(in, soon(), false);
    ASSERT_TRUE(r) << "what arrived before is still there: " << r.error().message();
    ASSERT_EQ(*r, good.size()) << "nothing beyond what the good CDC announced";
    EXPECT_TRUE(std::equal(good.begin(), good.end(), in.begin()));
    r = c.server->recv(in, soon(), false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    // The server told the client.
    ASSERT_TRUE(test::eventually([&] {
        Result<std::size_t> s = c.client->send(good, soon(), true, /*hold=*/false);
        return !s && s.error() == std::errc::connection_reset;
    }));
}

TEST_F(SmcrConnections, AValidationAheadOfWhatArrivedAborts)
{
    ASSERT_TRUE(opened());
    cdc::CdcMessage v;
    v.seq = 500; // the server never processed a CDC 500
    v.token = c.sc->token;
    v.producerFlags.failoverValidation = true;
    ASSERT_TRUE(p.client.group->sendCdc(*c.cc, cdc::encodeSmcr(v)));
    std::array<std::byte, 8> b{};
    Result<std::size_t> r = c.server->recv(b, soon(), false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset) << "out of sync";
}

TEST_F(SmcrConnections, ACdcForAnUnknownTokenIsDroppedAndCounted)
{
    ASSERT_TRUE(opened());
    cdc::CdcMessage stray;
    stray.seq = 1;
    stray.token = 0xdeadbeef;
    stray.producer = {0, 10};
    const std::uint64_t before = p.server.group->stats().cdcUnknownToken;
    for (int i = 0; i < 3; ++i)
        ASSERT_TRUE(p.client.group->sendCdc(*c.cc, cdc::encodeSmcr(stray)));
    ASSERT_TRUE(
        test::eventually([&] { return p.server.group->stats().cdcUnknownToken == before + 3; }));
    // The connection did not notice.
    std::array<std::byte, 10> b{};
    ASSERT_TRUE(c.client->send(b, soon(), false, /*hold=*/false));
    Result<std::size_t> r = c.server->recv(b, soon(), false);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, b.size());
    EXPECT_EQ(p.server.terminations.load(), 0);
}

TEST_F(SmcrConnections, NonBlockingCallsSayTryAgain)
{
    ASSERT_TRUE(opened(16384, 16384));
    std::array<std::byte, 1000> b{};
    Result<std::size_t> r = c.server->recv(b, soon(), true);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::resource_unavailable_try_again);
    EXPECT_FALSE(c.server->readable());
    std::size_t sent = 0;
    for (;;) {
        Result<std::size_t> s = c.client->send(b, soon(), true, /*hold=*/false);
        if (!s) {
            EXPECT_EQ(s.error(), std::errc::resource_unavailable_try_again);
            break;
        }
        sent += *s;
        ASSERT_LE(sent, c.sc->rmb.size()) << "never more than the peer's ring";
    }
    EXPECT_EQ(sent, c.sc->rmb.size());
    EXPECT_FALSE(c.client->writable());
    const int fd = c.client->enableEvents(-1);
    EXPECT_GE(fd, 0);
    std::vector<std::byte> in(sent);
    std::size_t got = 0;
    while (got < sent) {
        Result<std::size_t> g = c.server->recv(std::span(in).subspan(got), soon(), false);
        ASSERT_TRUE(g);
        got += *g;
    }
    ASSERT_TRUE(test::eventually([&] { return c.client->writable(); })) << "the window update came";
    c.client->drainEvents();
    EXPECT_TRUE(c.client->send(b, soon(), true, /*hold=*/false));
}

// Both ends full and neither reads: each tells the other it is write-blocked once, and
// that is all; a CDC that frees no space is no reason to say it again.
TEST_F(SmcrConnections, TwoBlockedSendersDoNotBounceWriteBlockedCdcs)
{
    ASSERT_TRUE(opened(16384, 16384));
    auto fill = [](SmcrConnection& conn) {
        std::array<std::byte, 4096> b{};
        std::uint64_t sent = 0;
        for (;;) { // blocks once the peer's ring is full, until the deadline
            Result<std::size_t> n = conn.send(b, soon(1s), false, /*hold=*/false);
            if (!n) {
                EXPECT_EQ(n.error(), std::errc::timed_out);
                return sent;
            }
            sent += *n;
        }
    };
    std::uint64_t fromServer = 0;
    std::thread t([&] { fromServer = fill(*c.server); });
    const std::uint64_t fromClient = fill(*c.client);
    t.join();
    EXPECT_EQ(fromClient, c.sc->rmb.size());
    EXPECT_EQ(fromServer, c.cc->rmb.size());
    // One CDC per send, and one write_blocked each (a few more if the two raced); a bounce
    // makes thousands in that second.
    const std::uint64_t writes = fromClient / 4096 + fromServer / 4096;
    EXPECT_LE(c.client->stats().cdcOut + c.server->stats().cdcOut, writes + 6);
}

TEST_F(SmcrConnections, TheGroupsEndIsAReset)
{
    ASSERT_TRUE(opened());
    p.server.group->terminate("test");
    std::array<std::byte, 8> b{};
    Result<std::size_t> r = c.server->recv(b, soon(), false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    ASSERT_TRUE(test::eventually([&] { return c.client->readable(); }));
    r = c.client->send(b, soon(), false, /*hold=*/false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
}

} // namespace
} // namespace smc
