// SPDX-License-Identifier: MIT
// A careless caller's connection handles: writes outside either buffer, through rows the peer
// deleted, after close, of another group; each gets its own clear error and nothing on the wire.
// And a failed handshake that leaves the rtoken row it shares with another connection alone.
#include "smc/core/conn_errors.h"
#include "smc/core/link_group.h"

#include <array>
#include <atomic>
#include <cstring>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "tests/libtest/hostile.h"
#include "tests/libtest/link_groups.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

struct Pair : test::GroupPair {
    explicit Pair(unsigned maxLinks = 1, std::chrono::milliseconds flowStart = 5s)
    {
        LinkGroupConfig config;
        config.maxLinks = maxLinks;
        config.timeouts.firstLink = 2s;
        config.timeouts.wait = 1s;
        config.timeouts.flowStart = flowStart;
        config.timeouts.testLink = 0ms;
        Result<void> created = create(config);
        EXPECT_TRUE(created) << created.error().message();
    }
    void start() { test::start(*this); }
    ConnectionPair connect(std::size_t bytes = 65536)
    {
        return test::handshake(*server.group, *client.group, bytes);
    }
};

// RDMA WRITEs the client's end of the (one) link put on the wire.
std::uint64_t clientWrites(Pair& p)
{
    return p.fabric().channel(p.fabric().lastQpn() + 0x10000)->writes();
}

std::vector<std::byte> bytes(std::size_t n, std::uint8_t value)
{
    return std::vector<std::byte>(n, std::byte{value});
}

bool holds(const BufferRef& buffer, std::size_t offset, std::size_t n, std::uint8_t value)
{
    for (std::size_t i = 0; i < n; ++i)
        if (buffer.data()[offset + i] != std::byte{value})
            return false;
    return true;
}

// The client's sndbuf (64 KiB) is larger than the server's RMB (16 KiB): a
// write that fits the first but not the second never reaches the wire, so
// over RC no remote access error breaks the link.
TEST(Connection, AWriteBeyondThePeerRmbIsRefusedBeforeTheWire)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    Result<LinkGroup::Handshake> hs = p.server.group->beginHandshake(16384, 16384);
    ASSERT_TRUE(hs);
    Result<LinkGroup::Handshake> hc = p.client.group->beginHandshake(
        65536, 65536, p.server.group->linkId(hs->connection()->link()));
    ASSERT_TRUE(hc);
    ConnectionPtr sc = hs->connection(), cc = hc->connection();
    ASSERT_EQ(sc->rmb.size(), 16384u);
    const RtokenTable::Rtoken serverRmb = hs->rtoken();
    ASSERT_TRUE(hs->complete(hc->rtoken(), cc->rmb.size()));
    ASSERT_TRUE(hc->complete(serverRmb, sc->rmb.size()));

    const std::uint64_t before = clientWrites(p);
    EXPECT_EQ(p.client.group->write(*cc, 16384 - 8, bytes(16, 1)).error(), ConnErrc::PeerRmbRange);
    EXPECT_EQ(p.client.group->write(*cc, 20000, bytes(1, 1)).error(), ConnErrc::PeerRmbRange);
    EXPECT_EQ(clientWrites(p), before) << "nothing went on the wire";
    EXPECT_EQ(p.client.group->activeLinks(), 1u);
    EXPECT_EQ(p.client.group->stats().failovers, 0u);
    ASSERT_TRUE(p.client.group->write(*cc, 16384 - 8, bytes(8, 2))) << "the last bytes fit";
    EXPECT_TRUE(holds(sc->rmb, 16384 - 8, 8, 2));
}

TEST(Connection, OutOfRangeErrorsSayWhichBuffer)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    auto [sc, cc] = p.connect(16384);
    ASSERT_TRUE(sc && cc);
    const std::error_code snd = p.client.group->write(*cc, 16384, bytes(1, 1)).error();
    EXPECT_EQ(snd, ConnErrc::SndbufRange);
    EXPECT_NE(snd.message().find("send buffer"), std::string::npos) << snd.message();
    EXPECT_NE(std::error_code(ConnErrc::PeerRmbRange).message(), snd.message());
    EXPECT_EQ(p.client.group->write(*cc, std::size_t(-1), bytes(1, 1)).error(),
              ConnErrc::SndbufRange)
        << "no overflow in the bounds check";
}

// An empty write is checked like any other, then does nothing (no memcpy
// from a null span, no work request).
TEST(Connection, AnEmptyWriteIsANoOpOnceChecked)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    auto [sc, cc] = p.connect(16384);
    ASSERT_TRUE(sc && cc);
    const std::uint64_t before = clientWrites(p);
    EXPECT_TRUE(p.client.group->write(*cc, 0, {}));
    EXPECT_TRUE(p.client.group->write(*cc, 16384, {}));
    EXPECT_EQ(p.client.group->write(*cc, 16385, {}).error(), ConnErrc::SndbufRange);
    EXPECT_EQ(clientWrites(p), before);
}

// The WRITEs and the CDC behind them in one call: every piece checked before anything goes
// (a bad one sends nothing, and is never told landed), a link that is not the named one
// takes nothing, then the pieces land where they say, the CDC is taken and told landed.
TEST(Connection, WritesThenACdcCheckEveryPieceFirst)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    auto [sc, cc] = p.connect(16384);
    ASSERT_TRUE(sc && cc);
    std::array<std::byte, 44> cdc{};
    cdc[0] = std::byte{0xFE}; // a CDC by its type; the server drops its unknown token
    cdc[1] = std::byte{44};
    using Piece = LinkGroup::SndbufPiece;
    LinkGroup& g = *p.client.group;
    const LinkGroup::LinkRef via = g.linkOf(*cc);
    ASSERT_NE(via.id, 0);
    int told = 0, landed = 0;
    auto onLanded = [&](bool ok) {
        ++told;
        landed += ok;
    };
    const std::uint64_t writes = clientWrites(p), cdcs = g.stats().cdcOut;
    const std::array<Piece, 2> badPeer{Piece{0, 0, 8}, Piece{8, 16384 - 4, 8}};
    EXPECT_EQ(g.writeSndbufThenCdc(*cc, via, badPeer, cdc, onLanded).error(),
              ConnErrc::PeerRmbRange);
    const std::array<Piece, 1> badSndbuf{Piece{16384 - 4, 0, 8}};
    EXPECT_EQ(g.writeSndbufThenCdc(*cc, via, badSndbuf, cdc, onLanded).error(),
              ConnErrc::SndbufRange);
    const std::array<Piece, 4> tooMany{};
    EXPECT_EQ(g.writeSndbufThenCdc(*cc, via, tooMany, cdc, onLanded).error(),
              std::errc::invalid_argument);
    EXPECT_EQ(g.writeSndbufThenCdc(*cc, via, {}, std::span(cdc).first(43), onLanded).error(),
              std::errc::invalid_argument);
    const LinkGroup::LinkRef gone{via.slot, static_cast<std::uint8_t>(via.id + 1)};
    EXPECT_EQ(g.writeSndbufThenCdc(*cc, gone, badSndbuf, cdc, onLanded).error(),
              ConnErrc::SndbufRange);
    const std::array<Piece, 1> one{Piece{0, 0, 8}};
    EXPECT_EQ(g.writeSndbufThenCdc(*cc, gone, one, cdc, onLanded).error(),
              std::errc::not_connected);
    EXPECT_EQ(g.sendCdc(*cc, cdc, gone).error(), std::errc::not_connected);
    EXPECT_EQ(clientWrites(p), writes) << "nothing went on the wire";
    EXPECT_EQ(g.stats().cdcOut, cdcs);
    EXPECT_EQ(told, 0);

    ASSERT_TRUE(g.fillSndbuf(*cc, 100, bytes(30, 7)));
    const std::array<Piece, 3> good{Piece{100, 16384 - 10, 10}, Piece{110, 0, 20},
                                    Piece{0, 500, 0}}; // the ring's wrap; an empty piece
    ASSERT_TRUE(g.writeSndbufThenCdc(*cc, via, good, cdc, onLanded));
    EXPECT_EQ(clientWrites(p), writes + 2) << "an empty piece posts nothing";
    EXPECT_EQ(g.stats().cdcOut, cdcs + 1);
    EXPECT_EQ(told, 1); // in process, before the call returns
    EXPECT_EQ(landed, 1);
    EXPECT_TRUE(holds(sc->rmb, 16384 - 10, 10, 7));
    EXPECT_TRUE(holds(sc->rmb, 0, 20, 7));
}

// The server closes its end: its DELETE_RKEY frees the client's row while
// the client's connection is still open, and the next connection takes that
// row. A write through the old connection must not land in the new RMB.
TEST(Connection, AWriteThroughARowThePeerDeletedFails)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    auto [oldS, oldC] = p.connect();
    ASSERT_TRUE(oldS && oldC);
    const unsigned row = *oldC->peerRmb();
    ASSERT_TRUE(p.server.group->closeConnection(*oldS));
    auto [newS, newC] = p.connect();
    ASSERT_TRUE(newS && newC);
    ASSERT_EQ(*newC->peerRmb(), row) << "the freed row is taken again";
    std::memset(newS->rmb.data(), 0, 256);

    EXPECT_EQ(p.client.group->write(*oldC, 0, bytes(256, 9)).error(), ConnErrc::PeerRmbGone);
    EXPECT_TRUE(holds(newS->rmb, 0, 256, 0)) << "nothing reached the new connection's RMB";
    EXPECT_TRUE(test::writeToPeer(*p.client.group, *newC, *newS, 3)) << "the new one writes";
    EXPECT_TRUE(p.client.group->closeConnection(*oldC)) << "and the old one still closes";
}

TEST(Connection, HandlesAfterCloseGiveClosed)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    auto [sc, cc] = p.connect();
    ASSERT_TRUE(sc && cc);
    ASSERT_TRUE(p.client.group->closeConnection(*cc));
    EXPECT_EQ(cc->state(), Connection::State::Closed);
    EXPECT_EQ(p.client.group->write(*cc, 0, bytes(8, 1)).error(), ConnErrc::Closed);
    EXPECT_EQ(p.client.group->closeConnection(*cc).error(), ConnErrc::Closed);
    EXPECT_EQ(p.client.group->connectionCount(), 0u);
    const PoolStats stats = p.client.group->pool().stats();
    EXPECT_EQ(stats.rmb.inUseBytes + stats.sndbuf.inUseBytes, 0) << "released once, not twice";
    EXPECT_EQ(stats.rmb.releases + stats.sndbuf.releases, 2u);
    EXPECT_TRUE(p.server.group->closeConnection(*sc));
}

TEST(Connection, HandlesOfAnEndedGroupGiveNotConnected)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    auto [sc, cc] = p.connect();
    ASSERT_TRUE(sc && cc);
    p.server.group->terminate("test");
    ASSERT_TRUE(test::eventually([&] { return p.client.group->terminated(); }));
    ASSERT_TRUE(test::eventually([c = cc] { return c->state() == Connection::State::Ended; }));
    EXPECT_EQ(p.client.group->write(*cc, 0, bytes(8, 1)).error(), std::errc::not_connected);
    EXPECT_EQ(p.client.group->closeConnection(*cc).error(), std::errc::not_connected);
    p.server.group.reset();
    EXPECT_EQ(sc->state(), Connection::State::Ended) << "the handle outlives its group";
}

TEST(Connection, AnotherGroupsConnectionIsRefused)
{
    Pair a, b;
    ASSERT_NO_FATAL_FAILURE(a.start());
    ASSERT_NO_FATAL_FAILURE(b.start());
    auto [as, ac] = a.connect();
    auto [bs, bc] = b.connect();
    ASSERT_TRUE(as && ac && bs && bc);
    std::memset(bs->rmb.data(), 0, 64);
    EXPECT_EQ(a.client.group->write(*bc, 0, bytes(64, 5)).error(), ConnErrc::UnknownConnection);
    EXPECT_TRUE(holds(bs->rmb, 0, 64, 0));
    EXPECT_EQ(a.client.group->closeConnection(*bc).error(), ConnErrc::UnknownConnection);
    EXPECT_EQ(bc->state(), Connection::State::Open);
    EXPECT_TRUE(test::writeToPeer(*b.client.group, *bc, *bs, 4));
}

// Writers and a closer race: every write either lands or says Closed, and
// the buffers go back to the pool only once no write touches them.
TEST(Connection, CloseWaitsForWritesInFlight)
{
    Pair p;
    ASSERT_NO_FATAL_FAILURE(p.start());
    for (int round = 0; round < 20; ++round) {
        auto [sc, cc] = p.connect(16384);
        ASSERT_TRUE(sc && cc);
        std::atomic<unsigned> other{0};
        std::vector<std::thread> writers;
        for (int t = 0; t < 2; ++t)
            writers.emplace_back([&, cc = cc, offset = t * 8192u] { // disjoint bytes
                for (;;) {
                    Result<void> r = p.client.group->write(*cc, offset, bytes(4096, 1));
                    if (!r) {
                        if (r.error() != ConnErrc::Closed)
                            ++other;
                        return;
                    }
                }
            });
        std::this_thread::sleep_for(1ms);
        EXPECT_TRUE(p.client.group->closeConnection(*cc));
        for (auto& w : writers)
            w.join();
        EXPECT_EQ(other.load(), 0u);
        EXPECT_TRUE(p.server.group->closeConnection(*sc));
    }
}

// Two handshakes that name the same peer RMB (rkey and address on the same
// link) share its rtoken row: addRow hands the second one the row it has. A
// second handshake that then fails (the peer refuses its CONFIRM_RKEY) must
// leave the row to the first connection, which still writes through it.
TEST(Connection, AFailedHandshakeLeavesARowItShares)
{
    test::RawPeer p(test::hostileConfig(Role::Client)); // the test is the server
    ASSERT_TRUE(p.start(1));
    ASSERT_NO_FATAL_FAILURE(test::serveAddLink(p, 2)); // CONFIRM_RKEY needs another link
    ASSERT_EQ(p.group().activeLinks(), 2u);
    const unsigned slot = test::slotOfId(p.group(), 1).value();
    const RtokenTable::Rtoken peerRmb{0xC1, 0x10000};
    // A handshake on link 1, its CONFIRM_RKEY answered by the peer (on link 1).
    auto handshake = [&](bool refuse) -> std::pair<ConnectionPtr, Result<void>> {
        Result<LinkGroup::Handshake> hs = p.group().beginHandshake(16384, 16384, 1);
        if (!hs)
            return {nullptr, hs.error()};
        std::future<Result<void>> done =
            std::async(std::launch::async, [&] { return hs->complete(peerRmb, 16384); });
        std::optional<llc::Message> req = p.end(0)->nextOf(llc::Type::ConfirmRkey, false);
        EXPECT_TRUE(req) << "no CONFIRM_RKEY";
        if (req) {
            llc::ConfirmRkey answer = std::get<llc::ConfirmRkey>(req->body);
            answer.negative = refuse;
            EXPECT_TRUE(p.end(0)->send({1, true, answer}));
        }
        return {hs->connection(), done.get()};
    };
    auto [first, completed] = handshake(false);
    ASSERT_TRUE(completed) << completed.error().message();
    ASSERT_TRUE(first->peerRmb());
    const unsigned row = *first->peerRmb();
    ASSERT_EQ(p.group().rtokens().get(row, slot), peerRmb);

    auto [second, refused] = handshake(true);
    EXPECT_EQ(refused.error(), std::errc::connection_refused);
    EXPECT_EQ(second->state(), Connection::State::Closed);
    EXPECT_EQ(p.group().rtokens().used(), 1u) << "the first connection's row";
    EXPECT_EQ(p.group().rtokens().get(row, slot), peerRmb);
    EXPECT_EQ(first->state(), Connection::State::Open);
}

// The server's share of a join once announced: our RMB is on every link and the group's flow
// token is free while the client answers ACCEPT, so another connection's close (DELETE_RKEY)
// runs at once; a handshake that did not announce holds the token until complete().
TEST(Connection, AnAnnouncedHandshakeLeavesTheFlowTokenFree)
{
    Pair p(2, 300ms);
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    ConnectionPair a = p.connect(), b = p.connect();
    ASSERT_TRUE(a.first && b.first);
    {
        Result<LinkGroup::Handshake> held = p.server.group->beginHandshake(16384, 16384);
        ASSERT_TRUE(held) << held.error().message();
        Result<void> closed = p.server.group->closeConnection(*a.first);
        ASSERT_FALSE(closed) << "the token is the handshake's";
        EXPECT_EQ(closed.error(), std::errc::timed_out);
    }
    Result<LinkGroup::Handshake> hs = p.server.group->beginHandshake(16384, 16384);
    ASSERT_TRUE(hs) << hs.error().message();
    ASSERT_TRUE(hs->announce());
    EXPECT_EQ(hs->announce().error(), ConnErrc::HandshakeDone);
    EXPECT_TRUE(p.server.group->closeConnection(*b.first)) << "the token is free";
    Result<void> done = hs->complete({0xC1, 0x10000}, 16384);
    ASSERT_TRUE(done) << done.error().message();
    EXPECT_EQ(hs->connection()->state(), Connection::State::Open);
    EXPECT_TRUE(hs->connection()->peerRmb());
}

// Failover moved the connection off the link ACCEPT named: the client's rtoken is for that
// link, so complete() refuses and closes the connection.
TEST(Connection, AnAnnouncedHandshakeWhoseLinkWentFails)
{
    Pair p(2);
    ASSERT_NO_FATAL_FAILURE(p.start());
    ASSERT_TRUE(test::eventually([&] { return p.client.group->activeLinks() == 2; }));
    Result<LinkGroup::Handshake> hs = p.server.group->beginHandshake(16384, 16384);
    ASSERT_TRUE(hs && hs->announce());
    const unsigned named = hs->link();
    ASSERT_TRUE(p.server.group->breakLink(named));
    ASSERT_TRUE(test::eventually([&] { return hs->connection()->link() != named; }))
        << "failover moves it";
    EXPECT_EQ(hs->link(), named) << "still the link CLC named";
    Result<void> done = hs->complete({0xC1, 0x10000}, 16384);
    ASSERT_FALSE(done);
    EXPECT_EQ(done.error(), std::errc::not_connected);
    EXPECT_EQ(hs->connection()->state(), Connection::State::Closed);
}

} // namespace
} // namespace smc
