// SPDX-License-Identifier: MIT
// SmcrConnection pairs over an in-process link group pair, and checked streams between them.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "smc/conn/smcr_connection.h"
#include "smc/testing/local_pair.h"
#include "tests/libtest/link_groups.h"

namespace smc::test::smcr
{

using namespace std::chrono_literals;
using net::SmcrConnection;
using Pair = test::LinkGroupPair;

constexpr std::size_t kMiB = 1024 * 1024;

inline net::Deadline soon(std::chrono::seconds s = 120s)
{
    return net::Clock::now() + s;
}

// The byte at stream position i of direction `seed`: a lost, duplicated or misplaced byte
// shows at once.
inline std::byte at(std::uint64_t i, std::uint32_t seed)
{
    std::uint64_t x = (i + seed) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return std::byte(static_cast<std::uint8_t>(x >> 17));
}

struct Conns {
    std::unique_ptr<SmcrConnection> server, client;
    ConnectionPtr sc, cc;
};

inline Conns open(Pair& p, std::size_t rmb = 65536, std::size_t sndbuf = 65536,
                  std::size_t autocork = 0)
{
    Conns c;
    Result<ConnectionPair> pair = connectLocalPair(*p.server.group, *p.client.group, rmb, sndbuf);
    EXPECT_TRUE(pair) << pair.error().message();
    if (!pair)
        return c;
    c.sc = pair->first;
    c.cc = pair->second;
    auto s = SmcrConnection::create(p.server.group, c.sc, c.cc->token, c.cc->rmb.size(), autocork);
    auto k = SmcrConnection::create(p.client.group, c.cc, c.sc->token, c.sc->rmb.size(), autocork);
    EXPECT_TRUE(s && k);
    if (s)
        c.server = std::move(*s);
    if (k)
        c.client = std::move(*k);
    return c;
}

// Sends `total` bytes of direction `seed` in chunks of changing, odd sizes.
inline void pump(SmcrConnection& c, std::uint64_t total, std::uint32_t seed,
                 std::atomic<bool>& failed)
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
            Result<std::size_t> r = c.send(std::span(buf).subspan(off, n - off), soon(),
                                           /*nonBlocking=*/false, /*hold=*/false);
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
inline std::uint64_t drain(SmcrConnection& c, std::uint64_t total, std::uint32_t seed,
                           std::atomic<bool>& failed,
                           std::atomic<std::uint64_t>* progress = nullptr)
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

// Sends bytes [from, from + n) of the stream of `seed`, blocking, in as many calls as it
// takes (each at most a sndbuf).
inline void sendRange(SmcrConnection& c, std::uint64_t from, std::size_t n, bool hold,
                      std::uint32_t seed)
{
    std::vector<std::byte> b(n);
    for (std::size_t i = 0; i < n; ++i)
        b[i] = at(from + i, seed);
    for (std::size_t off = 0; off < n;) {
        Result<std::size_t> r = c.send(std::span(b).subspan(off), soon(), false, hold);
        ASSERT_TRUE(r) << r.error().message();
        ASSERT_GT(*r, 0u);
        off += *r;
    }
}

// Reads bytes [from, from + n) of the stream of `seed` and checks each.
inline void expectRange(SmcrConnection& c, std::uint64_t from, std::size_t n, std::uint32_t seed)
{
    std::vector<std::byte> got(n);
    for (std::size_t off = 0; off < n;) {
        Result<std::size_t> g = c.recv(std::span(got).subspan(off), soon(), false);
        ASSERT_TRUE(g) << g.error().message();
        ASSERT_GT(*g, 0u) << "the end came after " << from + off << " bytes";
        off += *g;
    }
    for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(got[i], at(from + i, seed)) << "byte " << from + i;
}

// Reads the orderly end of the stream (0 bytes, not a reset), within `until`.
inline void expectEnd(SmcrConnection& c, net::Deadline until = soon())
{
    std::array<std::byte, 16> tail;
    Result<std::size_t> end = c.recv(tail, until, false);
    ASSERT_TRUE(end) << end.error().message();
    ASSERT_EQ(*end, 0u) << "the orderly end";
}

inline void expectPoolsEmpty(Pair& p)
{
    for (test::GroupSide* side : {&p.server, &p.client}) {
        const PoolStats s = side->group->pool().stats();
        EXPECT_EQ(s.rmb.inUseBytes, 0) << "every RMB back in the pool";
        EXPECT_EQ(s.sndbuf.inUseBytes, 0) << "every sndbuf back in the pool";
    }
}

// A test (TEST_F) on a started pair of groups with `links` links each, all active:
// opened() makes the connection pair `c`. At the end both are closed (closing twice is
// harmless) and every buffer must be back in the pools.
class ConnectionTest : public ::testing::Test
{
protected:
    explicit ConnectionTest(unsigned links = 1) : p(links), links_(links) {}
    void SetUp() override
    {
        ASSERT_NO_FATAL_FAILURE(p.start());
        if (links_ > 1) {
            ASSERT_TRUE(waitForLinks(*p.server.group, *p.client.group, links_, 5s));
        }
    }
    void TearDown() override
    {
        if (c.client)
            c.client->close();
        if (c.server)
            c.server->close();
        expectPoolsEmpty(p);
    }
    // Opens `c` (RMBs of `rmb` bytes, sndbufs of `sndbuf`, autocorking up to `autocork`
    // bytes); false, with a failure recorded, if it could not.
    bool opened(std::size_t rmb = 65536, std::size_t sndbuf = 65536, std::size_t autocork = 0)
    {
        c = open(p, rmb, sndbuf, autocork);
        return c.server && c.client;
    }

    // The client's end of the link in `slot` (in-process links).
    InprocChannel& clientEnd(unsigned slot)
    {
        for (const LinkInfo& l : p.client.group->links())
            if (l.slot == slot)
                return *p.fabric().channel(l.local.qpn);
        ADD_FAILURE() << "no link in slot " << slot;
        return *p.fabric().channel(p.fabric().lastQpn());
    }

    Pair p;
    Conns c;

private:
    const unsigned links_;
};

} // namespace smc::test::smcr
