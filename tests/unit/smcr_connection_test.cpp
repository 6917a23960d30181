// SPDX-License-Identifier: MIT
// SmcrConnection over an in-process link group pair: streams, wraps, close, abort, hostile CDCs,
// failover mid-stream, non-blocking calls, buffers back in the pool.
#include "smc/socket/smcr_connection.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "smc/cdc/cdc_messages.h"
#include "tests/libtest/link_group_pair.h"
#include "tests/libtest/link_groups.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using net::SmcrConnection;
using Pair = test::LinkGroupPair;

constexpr std::size_t kMiB = 1024 * 1024;

net::Deadline soon(std::chrono::seconds s = 120s)
{
    return net::Clock::now() + s;
}

// The byte at stream position i of direction `seed`: a lost, duplicated or misplaced byte
// shows at once.
std::byte at(std::uint64_t i, std::uint32_t seed)
{
    std::uint64_t x = (i + seed) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return std::byte(static_cast<std::uint8_t>(x >> 17));
}

struct Conns {
    std::unique_ptr<SmcrConnection> server, client;
    ConnectionPtr sc, cc;
};

Conns open(Pair& p, std::size_t rmb = 65536, std::size_t sndbuf = 65536)
{
    Conns c;
    Result<ConnectionPair> pair = connectLocalPair(*p.server.group, *p.client.group, rmb, sndbuf);
    EXPECT_TRUE(pair) << pair.error().message();
    if (!pair)
        return c;
    c.sc = pair->first;
    c.cc = pair->second;
    auto s = SmcrConnection::create(p.server.group, c.sc, c.cc->token, c.cc->rmb.size());
    auto k = SmcrConnection::create(p.client.group, c.cc, c.sc->token, c.sc->rmb.size());
    EXPECT_TRUE(s && k);
    if (s)
        c.server = std::move(*s);
    if (k)
        c.client = std::move(*k);
    return c;
}

// Sends `total` bytes of direction `seed` in chunks of changing, odd sizes.
void pump(SmcrConnection& c, std::uint64_t total, std::uint32_t seed, std::atomic<bool>& failed)
{
    std::vector<std::byte> buf(200'003);
    std::uint64_t sent = 0;
    std::size_t step = 1;
    while (sent < total && !failed) {
        step = (step * 7 + 13) % buf.size() + 1;
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(step, total - sent));
        for (std::size_t i = 0; i < n; ++i)
            buf[i] = at(sent + i, seed);
        std::size_t off = 0;
        while (off < n) {
            Result<std::size_t> r =
                c.send(std::span(buf).subspan(off, n - off), soon(), /*nonBlocking=*/false);
            if (!r) {
                ADD_FAILURE() << "send at " << sent + off << ": " << r.error().message();
                failed = true;
                return;
            }
            off += *r;
        }
        sent += n;
    }
}

// Receives until `total` bytes arrived, each checked; returns how many did.
std::uint64_t drain(SmcrConnection& c, std::uint64_t total, std::uint32_t seed,
                    std::atomic<bool>& failed, std::atomic<std::uint64_t>* progress = nullptr)
{
    std::vector<std::byte> buf(150'001);
    std::uint64_t got = 0;
    std::size_t step = 3;
    while (got < total && !failed) {
        step = (step * 5 + 11) % buf.size() + 1;
        Result<std::size_t> r = c.recv(std::span(buf).first(step), soon(), false);
        if (!r) {
            ADD_FAILURE() << "recv at " << got << ": " << r.error().message();
            failed = true;
            break;
        }
        if (*r == 0) {
            ADD_FAILURE() << "early end of stream at " << got;
            failed = true;
            break;
        }
        for (std::size_t i = 0; i < *r; ++i)
            if (buf[i] != at(got + i, seed)) {
                ADD_FAILURE() << "byte " << got + i << " wrong";
                failed = true;
                return got;
            }
        got += *r;
        if (progress)
            progress->store(got);
    }
    return got;
}

void expectPoolsEmpty(Pair& p)
{
    for (test::GroupSide* side : {&p.server, &p.client}) {
        const PoolStats s = side->group->pool().stats();
        EXPECT_EQ(s.rmb.inUseBytes, 0) << "every RMB back in the pool";
        EXPECT_EQ(s.sndbuf.inUseBytes, 0) << "every sndbuf back in the pool";
    }
}

void closeBoth(Conns& c)
{
    c.client->close();
    c.server->close();
}

TEST(SmcrConnection, StreamsOneWayWithEveryByteInPlace)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p, 65536, 16384); // a sndbuf smaller than the peer's ring: staged chunks
    ASSERT_TRUE(c.server && c.client);
    std::atomic<bool> failed{false};
    const std::uint64_t total = 64 * kMiB;
    std::thread tx([&] { pump(*c.client, total, 1, failed); });
    EXPECT_EQ(drain(*c.server, total, 1, failed), total);
    tx.join();
    ASSERT_TRUE(c.client->shutdownWrite());
    std::array<std::byte, 16> b;
    Result<std::size_t> eof = c.server->recv(b, soon(), false);
    ASSERT_TRUE(eof) << eof.error().message();
    EXPECT_EQ(*eof, 0u) << "done_writing is the end of the stream";
    ConnectionInfo info;
    c.server->fillInfo(info);
    EXPECT_EQ(info.bytesReceived, total);
    closeBoth(c);
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, StreamsBothWaysAtOnce)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
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
    closeBoth(c);
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, SmallAndOddSizesAcrossTheWrap)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p, 16384, 16384);
    ASSERT_TRUE(c.server && c.client);
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
                    Result<std::size_t> r =
                        c.client->send(std::span(out).subspan(sent, n - sent), soon(), true);
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
    closeBoth(c);
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, ShutdownWriteAndClose)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
    ASSERT_TRUE(c.client->shutdownWrite());
    std::array<std::byte, 8> b{};
    Result<std::size_t> r = c.server->recv(b, soon(), false);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 0u);
    Result<std::size_t> s = c.client->send(b, soon(), false);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error(), std::errc::broken_pipe);
    // The other way still works, half closed.
    ASSERT_TRUE(c.server->send(b, soon(), false));
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
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, CloseWithUnreadDataAbortsThePeer)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
    std::array<std::byte, 100> b{};
    ASSERT_TRUE(c.client->send(b, soon(), false));
    ASSERT_TRUE(test::eventually([&] { return c.server->readable(); }));
    c.server->close(); // 100 bytes unread: abort
    ASSERT_TRUE(test::eventually([&] {
        Result<std::size_t> r = c.client->send(b, soon(), true);
        return !r && r.error() == std::errc::connection_reset;
    }));
    Result<std::size_t> r = c.client->recv(b, soon(), false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    c.client->close();
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, PeerGoneWithoutACloseIsAResetAfterTheGrace)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
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
    closeBoth(c);
    expectPoolsEmpty(p);
}

// The TCP FIN overtakes the peer's last CDCs (they come over the link, on other threads):
// here it comes before the peer even sends them. An orderly close stays one: every byte,
// then the end of the stream, not a reset.
TEST(SmcrConnection, PeerGoneBeforeTheClosingCdcsIsStillAnOrderlyEnd)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
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
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, ACursorBeyondTheRingAbortsAndCorruptsNothing)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
    std::array<std::byte, 100> good;
    for (std::size_t i = 0; i < good.size(); ++i)
        good[i] = at(i, 3);
    ASSERT_TRUE(c.client->send(good, soon(), false));
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
        Result<std::size_t> s = c.client->send(good, soon(), true);
        return !s && s.error() == std::errc::connection_reset;
    }));
    closeBoth(c);
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, AValidationAheadOfWhatArrivedAborts)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
    cdc::CdcMessage v;
    v.seq = 500; // the server never processed a CDC 500
    v.token = c.sc->token;
    v.producerFlags.failoverValidation = true;
    ASSERT_TRUE(p.client.group->sendCdc(*c.cc, cdc::encodeSmcr(v)));
    std::array<std::byte, 8> b{};
    Result<std::size_t> r = c.server->recv(b, soon(), false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset) << "out of sync";
    closeBoth(c);
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, ACdcForAnUnknownTokenIsDroppedAndCounted)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
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
    ASSERT_TRUE(c.client->send(b, soon(), false));
    Result<std::size_t> r = c.server->recv(b, soon(), false);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, b.size());
    EXPECT_EQ(p.server.terminations.load(), 0);
    closeBoth(c);
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, NonBlockingCallsSayTryAgain)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p, 16384, 16384);
    ASSERT_TRUE(c.server && c.client);
    std::array<std::byte, 1000> b{};
    Result<std::size_t> r = c.server->recv(b, soon(), true);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::resource_unavailable_try_again);
    EXPECT_FALSE(c.server->readable());
    std::size_t sent = 0;
    for (;;) {
        Result<std::size_t> s = c.client->send(b, soon(), true);
        if (!s) {
            EXPECT_EQ(s.error(), std::errc::resource_unavailable_try_again);
            break;
        }
        sent += *s;
        ASSERT_LE(sent, c.sc->rmb.size()) << "never more than the peer's ring";
    }
    EXPECT_EQ(sent, c.sc->rmb.size());
    EXPECT_FALSE(c.client->writable());
    const int fd = c.client->enableEvents();
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
    EXPECT_TRUE(c.client->send(b, soon(), true));
    closeBoth(c);
    expectPoolsEmpty(p);
}

// Both ends full and neither reads: each tells the other it is write-blocked once, and
// that is all; a CDC that frees no space is no reason to say it again.
TEST(SmcrConnection, TwoBlockedSendersDoNotBounceWriteBlockedCdcs)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p, 16384, 16384);
    ASSERT_TRUE(c.server && c.client);
    auto fill = [](SmcrConnection& conn) {
        std::array<std::byte, 4096> b{};
        std::uint64_t sent = 0;
        for (;;) { // blocks once the peer's ring is full, until the deadline
            Result<std::size_t> n = conn.send(b, soon(1s), false);
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
    closeBoth(c);
    expectPoolsEmpty(p);
}

// A write the lost link failed: not writable until failover moves the connection, so an
// epoll loop waits for the event instead of spinning on EAGAIN.
TEST(SmcrConnection, NotWritableWhileALostLinkWaitsForFailover)
{
    Pair p(2);
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(waitForLinks(*p.server.group, *p.client.group, 2, 5s));
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
    std::optional<LinkGroup::Handshake> hold; // the client's flow token: failover waits for it
    {
        Result<LinkGroup::Handshake> h = p.client.group->beginHandshake(16384, 16384);
        ASSERT_TRUE(h) << h.error().message();
        hold = std::move(*h);
    }
    ASSERT_TRUE(p.client.group->breakLink(c.cc->link()));
    std::array<std::byte, 1000> b{};
    Result<std::size_t> r = c.client->send(b, soon(), true);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::resource_unavailable_try_again);
    EXPECT_FALSE(c.client->writable()) << "space in the ring, but no link to write on";
    hold.reset();
    ASSERT_TRUE(test::eventually([&] { return c.client->writable(); })) << "failover moved it";
    EXPECT_TRUE(c.client->send(b, soon(), true));
    closeBoth(c);
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, ALinkBrokenMidStreamLosesNoByte)
{
    Pair p(2);
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(waitForLinks(*p.server.group, *p.client.group, 2, 5s));
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
    std::atomic<bool> failed{false};
    std::atomic<std::uint64_t> progress{0};
    const std::uint64_t total = 64 * kMiB;
    std::uint64_t toServer = 0, toClient = 0;
    std::thread a([&] { pump(*c.client, total, 1, failed); });
    std::thread b([&] { pump(*c.server, total, 2, failed); });
    std::thread d([&] { toClient = drain(*c.client, total, 2, failed); });
    std::thread breaker([&] {
        while (progress.load() < 8 * kMiB && !failed)
            std::this_thread::yield();
        const unsigned slot = c.sc->link();
        EXPECT_TRUE(p.server.group->breakLink(slot));
    });
    toServer = drain(*c.server, total, 1, failed, &progress);
    a.join();
    b.join();
    d.join();
    breaker.join();
    EXPECT_EQ(toServer, total);
    EXPECT_EQ(toClient, total);
    EXPECT_EQ(p.server.group->activeLinks(), 1u);
    EXPECT_GE(c.server->stats().moves + c.client->stats().moves, 2u) << "both sides moved";
    EXPECT_GE(c.server->stats().validations + c.client->stats().validations, 1u);
    EXPECT_EQ(p.server.terminations.load() + p.client.terminations.load(), 0);
    closeBoth(c);
    expectPoolsEmpty(p);
}

// Sends direction `seed` in chunks of changing sizes until `stop`, then done_writing; returns
// the bytes sent. Every chunk is bigger than the ring, so its CDCs say write_blocked and the
// receiver answers each read of more than the window update limit with an update.
std::uint64_t pumpUntil(SmcrConnection& c, const std::atomic<bool>& stop, std::uint32_t seed,
                        std::atomic<bool>& failed)
{
    std::vector<std::byte> buf(200'003);
    std::uint64_t sent = 0;
    std::size_t step = 1;
    while (!stop && !failed) {
        step = (step * 7 + 13) % (buf.size() - 65536) + 65536;
        for (std::size_t i = 0; i < step; ++i)
            buf[i] = at(sent + i, seed);
        for (std::size_t off = 0; off < step;) {
            Result<std::size_t> r =
                c.send(std::span(buf).subspan(off, step - off), soon(), /*nonBlocking=*/false);
            if (!r) {
                ADD_FAILURE() << "send at " << sent + off << ": " << r.error().message();
                failed = true;
                return sent + off;
            }
            off += *r;
        }
        sent += step;
    }
    EXPECT_TRUE(c.shutdownWrite());
    return sent;
}

// Review 1.1: a receiver's CDCs are all window updates, and its sequence number runs more
// than 32767 ahead of any CDC that carried its own data; the validation after a failover
// must still name one the sender processed, not one the sender takes for the future.
TEST(SmcrConnection, AReceiverWithManyWindowUpdatesSurvivesAFailover)
{
    Pair p(2);
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(waitForLinks(*p.server.group, *p.client.group, 2, 5s));
    Conns c = open(p, 16384, 16384); // a small ring: an update every 2.3 KiB read
    ASSERT_TRUE(c.server && c.client);
    std::atomic<bool> failed{false}, stop{false};
    std::uint64_t sent = 0;
    std::thread tx([&] { sent = pumpUntil(*c.client, stop, 5, failed); });
    std::vector<std::byte> buf(2400);
    std::uint64_t got = 0, brokenAt = 0;
    bool broken = false;
    for (;;) {
        Result<std::size_t> r = c.server->recv(buf, soon(), false);
        if (!r) {
            ADD_FAILURE() << "recv at " << got << ": " << r.error().message();
            failed = true;
            break;
        }
        if (*r == 0)
            break; // done_writing
        for (std::size_t i = 0; i < *r; ++i)
            if (buf[i] != at(got + i, 5)) {
                ADD_FAILURE() << "byte " << got + i << " wrong";
                failed = true;
                break;
            }
        if (failed)
            break;
        got += *r;
        // Between 32768 and 65535 CDCs ahead of the last (none) that carried data of ours.
        if (!broken && c.server->stats().cdcOut > 33'000) {
            EXPECT_TRUE(p.server.group->breakLink(c.sc->link()));
            broken = true;
            brokenAt = got;
        }
        if (broken && got > brokenAt + 2 * kMiB)
            stop = true;
    }
    stop = true;
    tx.join();
    EXPECT_TRUE(broken);
    EXPECT_FALSE(failed);
    EXPECT_EQ(got, sent);
    EXPECT_GE(c.client->stats().validations, 1u) << "the receiver's validation matched";
    EXPECT_EQ(p.server.terminations.load() + p.client.terminations.load(), 0);
    closeBoth(c);
    expectPoolsEmpty(p);
}

// More than 32767 one-byte sends that the peer has not read: its cursors prove none of them,
// yet the peer processed them all, so the validation must not be older than 32767 either.
TEST(SmcrConnection, ManyTinySendsToAPeerThatDoesNotReadSurviveAFailover)
{
    Pair p(2);
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(waitForLinks(*p.server.group, *p.client.group, 2, 5s));
    Conns c = open(p, 65536, 16384);
    ASSERT_TRUE(c.server && c.client);
    constexpr std::size_t kSends = 33'500; // fits the ring unread
    for (std::size_t i = 0; i < kSends; ++i) {
        const std::byte b = at(i, 6);
        Result<std::size_t> r = c.client->send(std::span(&b, 1), soon(), false);
        ASSERT_TRUE(r && *r == 1) << "send " << i;
    }
    ASSERT_TRUE(test::eventually([&] { return c.server->stats().cdcIn >= kSends; }));
    ASSERT_TRUE(p.client.group->breakLink(c.cc->link()));
    ASSERT_TRUE(test::eventually([&] {
        return c.client->stats().moves >= 1 && c.server->stats().validations >= 1;
    })) << "the client's validation matched";
    std::vector<std::byte> in(kSends);
    for (std::size_t got = 0; got < kSends;) {
        Result<std::size_t> r = c.server->recv(std::span(in).subspan(got), soon(), false);
        ASSERT_TRUE(r) << r.error().message();
        got += *r;
    }
    for (std::size_t i = 0; i < kSends; ++i)
        ASSERT_EQ(in[i], at(i, 6)) << "byte " << i;
    std::array<std::byte, 100> more{};
    Result<std::size_t> s = c.client->send(more, soon(), false);
    EXPECT_TRUE(s) << s.error().message();
    EXPECT_EQ(p.server.terminations.load() + p.client.terminations.load(), 0);
    closeBoth(c);
    expectPoolsEmpty(p);
}

TEST(SmcrConnection, TheGroupsEndIsAReset)
{
    Pair p(1);
    ASSERT_NO_FATAL_FAILURE(p.start());
    Conns c = open(p);
    ASSERT_TRUE(c.server && c.client);
    p.server.group->terminate("test");
    std::array<std::byte, 8> b{};
    Result<std::size_t> r = c.server->recv(b, soon(), false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    ASSERT_TRUE(test::eventually([&] { return c.client->readable(); }));
    r = c.client->send(b, soon(), false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    closeBoth(c);
    expectPoolsEmpty(p);
}

} // namespace
} // namespace smc
