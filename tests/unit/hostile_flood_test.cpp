// SPDX-License-Identifier: MIT
// A hostile peer floods one LinkGroup (TEST_LINK, ADD_LINK, DELETE_LINK, REQ_ADD_LINK,
// CONFIRM_RKEY): what waits stays within its bound, what is dropped is counted, flows still run.
#include <future>

#include <gtest/gtest.h>

#include "tests/libtest/hostile.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using llc::Message;
using llc::Type;
using test::PeerEnd;
using test::RawPeer;

constexpr std::uint64_t kFlood = 10000;

llc::TestLink testLink(std::uint64_t i)
{
    llc::TestLink t;
    t.userData[0] = static_cast<std::uint8_t>(i);
    t.userData[1] = static_cast<std::uint8_t>(i >> 8);
    return t;
}

// While the echo of one TEST_LINK waits for the peer (which takes nothing),
// the link reads on and the rest of the flood shares one more echo, for the
// newest request. Before, each echo was sent from the link's delivery: one
// that waited stopped the link (every message behind it piled up), and every
// request got an echo of its own.
TEST(HostileFlood, TestLinkFloodSharesOneEcho)
{
    RawPeer p(test::hostileConfig(Role::Client));
    ASSERT_TRUE(p.start(1));
    PeerEnd* via = p.end();
    via->holdGroupSends();
    const std::uint64_t in = p.group().stats().messagesIn;
    ASSERT_TRUE(via->send({1, false, testLink(0)}));
    ASSERT_TRUE(test::eventually([&] { return via->groupSendsWaiting() == 1; }));
    for (std::uint64_t i = 1; i < kFlood; ++i)
        ASSERT_TRUE(via->send({1, false, testLink(i)}));
    ASSERT_TRUE(test::eventually([&] { return p.group().stats().messagesIn == in + kFlood; }))
        << "the link stopped reading while an echo waited";
    EXPECT_EQ(via->groupSendsWaiting(), 1u) << "one echo at a time";
    EXPECT_EQ(p.group().stats().testLinksCoalesced, kFlood - 2);

    via->releaseGroupSends();
    for (std::uint64_t i : {std::uint64_t{0}, kFlood - 1}) {
        std::optional<Message> echo = via->next();
        ASSERT_TRUE(echo && echo->type() == Type::TestLink && echo->response);
        EXPECT_EQ(std::get<llc::TestLink>(echo->body), testLink(i));
    }
    // Afterwards a TEST_LINK has its own echo, and a CONFIRM_RKEY its answer.
    ASSERT_TRUE(via->send({1, false, testLink(0xbeef)}));
    std::optional<Message> echo = via->next();
    ASSERT_TRUE(echo && echo->type() == Type::TestLink);
    EXPECT_EQ(std::get<llc::TestLink>(echo->body), testLink(0xbeef));
    ASSERT_TRUE(via->send({1, false, llc::ConfirmRkey{false, false, 0xA1, 0x1000, {}}}));
    std::optional<Message> answer = via->nextOf(Type::ConfirmRkey, true);
    ASSERT_TRUE(answer);
    EXPECT_FALSE(std::get<llc::ConfirmRkey>(answer->body).negative);
}

// ADD_LINKs that come while the group's flows are held back: each one takes
// the pending one's place (one flow adds one link; a server sends its next
// ADD_LINK only when its last flow is over). Before, all 10,000 queued, each
// to cost a queue pair, a bulk registration and a timeout.
TEST(HostileFlood, AddLinkFloodCollapsesIntoOneFlow)
{
    Executor executor(test::oneBlockingThread());
    RawPeer p(test::hostileConfig(Role::Client, &executor));
    ASSERT_TRUE(p.start(1));
    PeerEnd* via = p.end();
    test::HeldFlows held(executor);
    const std::uint64_t in = p.group().stats().messagesIn;
    auto idOf = [](std::uint64_t i) { return static_cast<std::uint8_t>(2 + i % 200); };
    for (std::uint64_t i = 0; i < kFlood; ++i)
        ASSERT_TRUE(via->send({1, false, test::addLinkRequest(idOf(i))}));
    ASSERT_TRUE(test::eventually([&] { return p.group().stats().messagesIn == in + kFlood; }));
    LinkGroupStats s = p.group().stats();
    EXPECT_EQ(s.requestsPending, 1u);
    EXPECT_EQ(s.requestsCoalesced, kFlood - 1);
    EXPECT_LE(s.requestQueuePeak, LlcEngine::kMaxPendingRequests);

    held.release();
    std::optional<Message> answer = via->nextOf(Type::AddLink, true);
    ASSERT_TRUE(answer);
    const auto& a = std::get<llc::AddLink>(answer->body);
    ASSERT_FALSE(a.reject);
    ASSERT_EQ(a.linkId, idOf(kFlood - 1)) << "the newest ADD_LINK runs";
    ASSERT_NO_FATAL_FAILURE(test::finishAddLink(p, a.linkId));
    EXPECT_EQ(p.group().activeLinks(), 2u);
    EXPECT_EQ(p.provider().made(), 2u) << "one queue pair for the flood";
    EXPECT_EQ(p.group().stats().requestsPending, 0u);
}

// DELETE_LINKs for 241 link ids, none ours: the queue holds its bound, one
// per link id; the rest is dropped and counted. After them, an ADD_LINK flow
// runs as usual.
TEST(HostileFlood, DeleteLinkFloodStaysWithinTheBound)
{
    Executor executor(test::oneBlockingThread());
    RawPeer p(test::hostileConfig(Role::Client, &executor));
    ASSERT_TRUE(p.start(1));
    PeerEnd* via = p.end();
    via->discard(Type::DeleteLink);
    {
        test::HeldFlows held(executor);
        const std::uint64_t in = p.group().stats().messagesIn;
        for (std::uint64_t i = 0; i < kFlood; ++i) {
            const auto id = static_cast<std::uint8_t>(10 + i % 241);
            ASSERT_TRUE(via->send({1, false, llc::DeleteLink{false, true, id, {}}}));
        }
        ASSERT_TRUE(test::eventually([&] { return p.group().stats().messagesIn == in + kFlood; }));
        LinkGroupStats s = p.group().stats();
        EXPECT_EQ(s.requestsPending, LlcEngine::kMaxPendingRequests);
        EXPECT_EQ(s.requestQueuePeak, LlcEngine::kMaxPendingRequests);
        EXPECT_GT(s.requestsDropped, 0u);
        EXPECT_EQ(s.requestsPending + s.requestsCoalesced + s.requestsDropped, kFlood);
    }
    ASSERT_TRUE(test::eventually([&] { return p.group().stats().requestsPending == 0; }));
    ASSERT_NO_FATAL_FAILURE(test::serveAddLink(p, 2));
    EXPECT_EQ(via->count(Type::DeleteLink), LlcEngine::kMaxPendingRequests)
        << "one \"no such link\" for each one queued";
    EXPECT_EQ(p.group().activeLinks(), 2u);
}

// REQ_ADD_LINKs at a server collapse as ADD_LINKs do at a client: one flow,
// which finds no device and declines. Then a legitimate addLink() runs.
TEST(HostileFlood, ReqAddLinkFloodAtAServerCollapsesIntoOneFlow)
{
    Executor executor(test::oneBlockingThread());
    RawPeer p(test::hostileConfig(Role::Server, &executor));
    Result<void> started = p.start();
    ASSERT_TRUE(started) << started.error().message();
    PeerEnd* via = p.end();
    const std::size_t asked = p.provider().asked;
    {
        test::HeldFlows held(executor);
        const std::uint64_t in = p.group().stats().messagesIn;
        const llc::ReqAddLink req{{test::RawProvider::peerGid(1)}};
        for (std::uint64_t i = 0; i < kFlood; ++i)
            ASSERT_TRUE(via->send({2, false, req}));
        ASSERT_TRUE(test::eventually([&] { return p.group().stats().messagesIn == in + kFlood; }));
        EXPECT_EQ(p.group().stats().requestsPending, 1u);
        EXPECT_EQ(p.group().stats().requestsCoalesced, kFlood - 1);
        p.provider().refuse = 1;
    }
    ASSERT_TRUE(via->nextOf(Type::ReqAddLink, true)) << "declined: no device";
    ASSERT_TRUE(test::eventually([&] { return p.group().stats().requestsPending == 0; }));
    EXPECT_EQ(p.provider().asked.load(), asked + 1) << "one try at a queue pair for the flood";

    auto added = std::async(std::launch::async, [&] { return p.group().addLink(); });
    std::optional<Message> offer = via->nextOf(Type::AddLink, false);
    ASSERT_TRUE(offer);
    ASSERT_NO_FATAL_FAILURE(test::answerAddLink(p, std::get<llc::AddLink>(offer->body)));
    Result<void> r = added.get();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(p.group().activeLinks(), 2u);
}

// The peer's CONFIRM_RKEYs name its own RMBs, so Linux takes them without
// asking what for, and answers NEG|RETRY once its 255 rows are used; so do
// we, and count those. A full table leaves no room for a connection, as in
// Linux (the manager opens another group), until the peer deletes rkeys.
TEST(HostileFlood, ConfirmRkeyFloodFillsTheRowsAsInLinux)
{
    RawPeer p(test::hostileConfig(Role::Client));
    ASSERT_TRUE(p.start(1));
    PeerEnd* via = p.end();
    unsigned positive = 0, negative = 0;
    for (std::uint32_t i = 0; i < 300; ++i) {
        ASSERT_TRUE(via->send({1, false, llc::ConfirmRkey{false, false, 0x5000 + i, 0x1000, {}}}));
        std::optional<Message> answer = via->nextOf(Type::ConfirmRkey, true);
        ASSERT_TRUE(answer);
        const auto& c = std::get<llc::ConfirmRkey>(answer->body);
        ++(c.negative ? negative : positive);
        EXPECT_EQ(c.negative, c.retry);
    }
    EXPECT_EQ(positive, RtokenTable::kRows);
    EXPECT_EQ(negative, 300 - RtokenTable::kRows);
    EXPECT_EQ(p.group().stats().rtokenRowsRefused, 300 - RtokenTable::kRows);
    EXPECT_FALSE(p.group().hasRoom());
    EXPECT_EQ(p.group().openConnection(16384, 16384).error(), std::errc::no_buffer_space);
    EXPECT_FALSE(p.group().terminated());

    llc::DeleteRkey d;
    for (std::uint32_t i = 0; i < 40; ++i)
        d.rkeys.push_back(0x5000 + i);
    ASSERT_TRUE(via->send({2, false, d}));
    ASSERT_TRUE(via->nextOf(Type::DeleteRkey, true));
    ASSERT_TRUE(via->send({1, false, llc::ConfirmRkey{false, false, 0x9999, 0x1000, {}}}));
    std::optional<Message> answer = via->nextOf(Type::ConfirmRkey, true);
    ASSERT_TRUE(answer);
    EXPECT_FALSE(std::get<llc::ConfirmRkey>(answer->body).negative);
    EXPECT_TRUE(p.group().hasRoom());
}

} // namespace
} // namespace smc
