// SPDX-License-Identifier: MIT
// SmcrConnection failover: a link broken mid-stream loses no byte, the validation CDC names
// what the peer processed however long the connection ran, and a lost link is not writable.
#include "smc/conn/smcr_connection.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/libtest/link_groups.h"
#include "tests/libtest/smcr_conns.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using namespace test::smcr;

// Two links each, both active: one can break.
class SmcrFailover : public ConnectionTest
{
protected:
    SmcrFailover() : ConnectionTest(2) {}
};

// The stream these tests send.
constexpr std::uint32_t kSeed = 3;

// The client's flow token: failover of the client's group waits for it.
std::optional<LinkGroup::Handshake> holdFailover(test::smcr::Pair& p)
{
    Result<LinkGroup::Handshake> h = p.client.group->beginHandshake(16384, 16384);
    EXPECT_TRUE(h) << h.error().message();
    return h ? std::optional<LinkGroup::Handshake>(std::move(*h)) : std::nullopt;
}

// A send on a lost link is kept in our sndbuf (the CDC that would announce it is not sent
// while its bytes cannot be written); the connection is then not writable until failover
// moves it, so an epoll loop waits for the event instead of spinning on EAGAIN; after the
// move the resend writes the kept bytes and announces them, with no further send.
TEST_F(SmcrFailover, NotWritableWhileALostLinkWaitsForFailover)
{
    ASSERT_TRUE(opened());
    std::optional<LinkGroup::Handshake> hold = holdFailover(p);
    ASSERT_TRUE(hold);
    ASSERT_TRUE(p.client.group->breakLink(c.cc->link()));
    std::array<std::byte, 1000> b{};
    for (std::size_t i = 0; i < b.size(); ++i)
        b[i] = at(i, kSeed);
    Result<std::size_t> r = c.client->send(b, soon(), true, /*hold=*/false);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, b.size()) << "kept in the sndbuf, as a TCP socket keeps what it sends";
    EXPECT_FALSE(c.client->writable()) << "space in the ring, but no link to write on";
    r = c.client->send(b, soon(), true, /*hold=*/false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::resource_unavailable_try_again);
    hold.reset();
    ASSERT_TRUE(test::eventually([&] { return c.client->writable(); })) << "failover moved it";
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 0, 1000, kSeed));
    EXPECT_GE(c.server->stats().validations, 1u) << "the resend's validation";
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 1000, 1000, false, kSeed));
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 1000, 1000, kSeed));
}

// Held bytes that fill the sndbuf on a lost link: the send that needs the room waits for
// failover (its write goes on the new link), and nothing is lost. (The CDC after the move
// carries the current cursors, so it may announce held bytes, as a cork's timer would.)
TEST_F(SmcrFailover, HeldBytesThatFillTheSndbufWaitForFailover)
{
    ASSERT_TRUE(opened(65536, 16384));
    std::optional<LinkGroup::Handshake> hold = holdFailover(p);
    ASSERT_TRUE(hold);
    ASSERT_TRUE(p.client.group->breakLink(c.cc->link()));
    std::thread release([&] {
        std::this_thread::sleep_for(100ms);
        hold.reset();
    });
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 0, 3 * 7000, /*hold=*/true, kSeed));
    release.join();
    EXPECT_GE(c.client->stats().moves, 1u);
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 21000, 10, /*hold=*/false, kSeed));
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 0, 21010, kSeed));
}

// close() on a lost link with a sent byte not written: nothing runs after close, so it waits
// for failover itself; the peer gets every byte, then the orderly end (not a reset).
TEST_F(SmcrFailover, CloseOnALostLinkDeliversWhatWasSentThenTheEnd)
{
    ASSERT_TRUE(opened());
    std::optional<LinkGroup::Handshake> hold = holdFailover(p);
    ASSERT_TRUE(hold);
    ASSERT_TRUE(p.client.group->breakLink(c.cc->link()));
    ASSERT_NO_FATAL_FAILURE(sendRange(*c.client, 0, 1000, false, kSeed));
    std::thread release([&] {
        std::this_thread::sleep_for(100ms);
        hold.reset();
    });
    c.client->close();
    release.join();
    ASSERT_NO_FATAL_FAILURE(expectRange(*c.server, 0, 1000, kSeed));
    ASSERT_NO_FATAL_FAILURE(expectEnd(*c.server));
}

TEST_F(SmcrFailover, ALinkBrokenMidStreamLosesNoByte)
{
    ASSERT_TRUE(opened());
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
            Result<std::size_t> r = c.send(std::span(buf).subspan(off, step - off), soon(),
                                           /*nonBlocking=*/false, /*hold=*/false);
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
TEST_F(SmcrFailover, AReceiverWithManyWindowUpdatesSurvivesAFailover)
{
    ASSERT_TRUE(opened(16384, 16384)); // a small ring: an update every 2.3 KiB read
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
}

// More than 32767 one-byte sends that the peer has not read: its cursors prove none of them,
// yet the peer processed them all, so the validation must not be older than 32767 either.
TEST_F(SmcrFailover, ManyTinySendsToAPeerThatDoesNotReadSurviveAFailover)
{
    ASSERT_TRUE(opened(65536, 16384));
    constexpr std::size_t kSends = 33'500; // fits the ring unread
    for (std::size_t i = 0; i < kSends; ++i) {
        const std::byte b = at(i, 6);
        Result<std::size_t> r = c.client->send(std::span(&b, 1), soon(), false, /*hold=*/false);
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
    Result<std::size_t> s = c.client->send(more, soon(), false, /*hold=*/false);
    EXPECT_TRUE(s) << s.error().message();
    EXPECT_EQ(p.server.terminations.load() + p.client.terminations.load(), 0);
}

} // namespace
} // namespace smc
