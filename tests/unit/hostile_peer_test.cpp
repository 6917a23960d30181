// SPDX-License-Identifier: MIT
// A hostile peer: raw LLC messages against one LinkGroup: link ids it may not use, DELETE_RKEY
// replies.
#include <gtest/gtest.h>

#include <thread>

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

// --- Link ids ------------------------------------------------------------------------

// The finding: a client with link 1 took an ADD_LINK for link 1, so two ACTIVE
// links shared the id. Link id 0 is what the API says for "no link". Both are
// rejected at once (ADD_LINK response, REJ), before any QP is made.
TEST(HostilePeer, AddLinkWithALinkIdInUseOrZeroIsRejected)
{
    RawPeer p(test::hostileConfig(Role::Client));
    ASSERT_TRUE(p.start(1));
    PeerEnd* via = p.end();
    for (std::uint8_t id : {1, 0}) {
        std::optional<llc::AddLink> answer = test::offerLink(*via, id);
        ASSERT_TRUE(answer) << "link id " << int(id);
        EXPECT_TRUE(answer->reject) << "link id " << int(id);
        EXPECT_EQ(answer->linkId, id);
    }
    EXPECT_EQ(p.provider().made(), 1u) << "no queue pair for a refused link";
    EXPECT_EQ(p.group().links().size(), 1u);
    EXPECT_EQ(p.group().stats().linkIdsRefused, 2u);

    // A link id that is free is fine.
    ASSERT_NO_FATAL_FAILURE(test::serveAddLink(p, 2));
    std::vector<std::uint8_t> ids;
    for (const LinkInfo& l : p.group().links())
        ids.push_back(l.linkId);
    EXPECT_EQ(ids, (std::vector<std::uint8_t>{1, 2}));
    EXPECT_EQ(p.group().terminated(), false);
}

// The first link's CONFIRM_LINK names the id the client adopts: 0 is refused.
TEST(HostilePeer, FirstLinkWithLinkIdZeroIsRefused)
{
    RawPeer p(test::hostileConfig(Role::Client));
    Result<void> started = p.start(0);
    EXPECT_FALSE(started) << "a link numbered 0";
    EXPECT_EQ(p.group().links().size(), 0u);
    EXPECT_EQ(p.group().stats().linkIdsRefused, 1u);
}

// A client with links 1 and 2 (symmetric), the test as its server.
struct TwoLinks : ::testing::Test {
    void SetUp() override
    {
        ASSERT_TRUE(p.start(1));
        ASSERT_NO_FATAL_FAILURE(test::serveAddLink(p, 2));
        ASSERT_EQ(p.group().activeLinks(), 2u);
        via = p.end(0);
    }
    // CONFIRM_RKEY on link 1: the peer's RMB `rkey` there and on `others`.
    Message confirmRkey(std::uint32_t rkey, std::vector<llc::RtokenEntry> others)
    {
        llc::ConfirmRkey c;
        c.rkey = rkey;
        c.vaddr = 0x10000;
        c.others = std::move(others);
        EXPECT_TRUE(via->send({1, false, c}));
        std::optional<Message> answer = via->nextOf(Type::ConfirmRkey, true);
        EXPECT_TRUE(answer) << "no CONFIRM_RKEY answer";
        return answer.value_or(Message{1, true, llc::ConfirmRkey{true, false, 0, 0, {}}});
    }
    unsigned slotOf(std::uint8_t linkId) { return test::slotOfId(p.group(), linkId).value(); }

    RawPeer p{test::hostileConfig(Role::Client)};
    PeerEnd* via = nullptr;
};

// Entries for "the other links" that name the link the message came on, link
// 0, or one link twice would overwrite the row's other columns: refused
// (negative), and nothing is stored. Linux ignores an id it does not know (a
// link that went meanwhile), and so do we.
TEST_F(TwoLinks, ConfirmRkeyNamingItsOwnLinkZeroOrOneLinkTwiceIsRefused)
{
    const std::vector<std::vector<llc::RtokenEntry>> bad = {
        {{1, 0xB1, 0x20000}},                      // the link it came on
        {{0, 0xB2, 0x20000}},                      // "no link"
        {{2, 0xB3, 0x20000}, {2, 0xB4, 0x30000}}}; // link 2 twice
    for (const auto& others : bad) {
        Message answer = confirmRkey(0xA1, others);
        EXPECT_TRUE(std::get<llc::ConfirmRkey>(answer.body).negative) << int(others[0].linkId);
    }
    EXPECT_EQ(p.group().rtokens().used(), 0u) << "a refused CONFIRM_RKEY stores nothing";
    EXPECT_EQ(p.group().stats().linkIdsRefused, 3u);

    Message unknown = confirmRkey(0xA2, {{9, 0xB5, 0x20000}});
    EXPECT_FALSE(std::get<llc::ConfirmRkey>(unknown.body).negative) << "Linux skips an unknown id";
    Message good = confirmRkey(0xA3, {{2, 0xB6, 0x40000}});
    EXPECT_FALSE(std::get<llc::ConfirmRkey>(good.body).negative);
    ASSERT_EQ(p.group().rtokens().used(), 2u);
    const std::optional<unsigned> row = p.group().rtokens().find(slotOf(1), 0xA3);
    ASSERT_TRUE(row);
    EXPECT_EQ(p.group().rtokens().get(*row, slotOf(2))->rkey, 0xB6u);
    const std::optional<unsigned> first = p.group().rtokens().find(slotOf(1), 0xA2);
    ASSERT_TRUE(first);
    EXPECT_FALSE(p.group().rtokens().get(*first, slotOf(2))) << "nothing for the unknown link";
}

// DELETE_LINK for link 0 (without ALL) or an id not in use: "no such link",
// both links stay.
TEST_F(TwoLinks, DeleteLinkNamingNoLinkIsAnsweredUnknown)
{
    for (std::uint8_t id : {0, 9}) {
        ASSERT_TRUE(via->send({1, false, llc::DeleteLink{false, true, id, {}}}));
        std::optional<Message> answer = via->nextOf(Type::DeleteLink, true);
        ASSERT_TRUE(answer) << int(id);
        EXPECT_EQ(std::get<llc::DeleteLink>(answer->body).reason, llc::DeleteReason::UnknownLink);
    }
    EXPECT_EQ(p.group().activeLinks(), 2u);
}

// Linux's server, once it lost a link, sends DELETE_LINK for it and drops the client's own
// request meanwhile. A client that lost the link only tells the server (as Linux's client
// does) and answers the server's request at once. The finding, with the kernel: a client
// that waited for an answer to its own request answered the server's, queued behind it,
// only when that wait ran out. Here the loss and the server's request both wait while the
// group's flows are held, so the request is in the queue before the client tells.
TEST(HostilePeer, AClientThatLostALinkAnswersTheServersDeleteLinkAtOnce)
{
    Executor executor(test::oneBlockingThread());
    LinkGroupConfig config = test::hostileConfig(Role::Client, &executor);
    config.timeouts.wait = 60s; // longer than the test waits for anything
    RawPeer p(config);
    ASSERT_TRUE(p.start(1));
    ASSERT_NO_FATAL_FAILURE(test::serveAddLink(p, 2));
    PeerEnd* via = p.end(0);
    {
        test::HeldFlows held(executor);
        p.end(1)->shutdown();
        ASSERT_TRUE(via->send({1, false, llc::DeleteLink{false, true, 2, {}}}));
        ASSERT_TRUE(test::eventually([&] {
            const LlcStats s = p.group().stats();
            return s.linksDown == 1 && s.requestsPending == 1;
        })) << "the loss and the request did not both wait";
    }
    std::optional<Message> told = via->nextOf(Type::DeleteLink, false, 10s);
    ASSERT_TRUE(told) << "the client did not tell the server";
    EXPECT_EQ(std::get<llc::DeleteLink>(told->body).linkId, 2);
    std::optional<Message> answer = via->nextOf(Type::DeleteLink, true, 10s);
    ASSERT_TRUE(answer) << "the client did not answer the server's DELETE_LINK";
    EXPECT_EQ(std::get<llc::DeleteLink>(answer->body).linkId, 2);
    EXPECT_EQ(p.group().activeLinks(), 1u);
    EXPECT_FALSE(p.group().terminated());
}

// The new link's ADD_LINK_CONT and CONFIRM_LINK must name the link being
// added; otherwise the flow fails at once (DELETE_LINK for the new link) and
// the link is cleared.
TEST(HostilePeer, AddLinkContNamingAnotherLinkFailsTheFlow)
{
    RawPeer p(test::hostileConfig(Role::Client));
    ASSERT_TRUE(p.start(1));
    PeerEnd* via = p.end();
    std::optional<llc::AddLink> answer = test::offerLink(*via, 2);
    ASSERT_TRUE(answer && !answer->reject);
    ASSERT_TRUE(via->send({1, false, llc::AddLinkCont{1, 0, {}}})); // link 1: not the new one
    std::optional<Message> next = via->next();
    ASSERT_TRUE(next);
    ASSERT_EQ(next->type(), Type::DeleteLink) << "got " << toString(next->type());
    EXPECT_EQ(std::get<llc::DeleteLink>(next->body).linkId, 2);
    EXPECT_TRUE(test::eventually([&] { return p.group().links().size() == 1; }));
    EXPECT_EQ(p.group().stats().linkIdsRefused, 1u);
}

// The client answers each ADD_LINK_CONT where it is delivered, and its flow waits for the
// whole exchange: a CONT keeps the exchange going past one wait (500 ms here), and a server
// that stops half way is given up on within two waits, not one per rkey it still owes.
TEST(HostilePeer, AddLinkContExchangeWaitsPerMessageAndGivesUpOnSilence)
{
    RawPeer p(test::hostileConfig(Role::Client));
    ASSERT_TRUE(p.start(1));
    PeerEnd* via = p.end();
    std::optional<llc::AddLink> answer = test::offerLink(*via, 2);
    ASSERT_TRUE(answer && !answer->reject);
    // Eight rkeys announced, two per message: three messages 300 ms apart (600 ms from the
    // first to the last, longer than one wait), then silence with two still owed.
    for (std::uint8_t remaining = 8; remaining > 2; remaining -= 2) {
        if (remaining < 8)
            std::this_thread::sleep_for(300ms);
        const llc::AddLinkCont cont{2, remaining, {{remaining, 0x100u + remaining, 0x1000}, {}}};
        ASSERT_TRUE(via->send({1, false, cont}));
        std::optional<Message> back = via->nextOf(Type::AddLinkCont, true, 2s);
        ASSERT_TRUE(back) << "no answer to the CONT announcing " << int(remaining);
        EXPECT_EQ(std::get<llc::AddLinkCont>(back->body).linkId, 2);
    }
    // The client clears the new link (the server, which gave up, clears its own end).
    const auto silent = std::chrono::steady_clock::now();
    ASSERT_TRUE(test::eventually([&] { return p.group().links().size() == 1; }))
        << "the client did not give up on a silent server";
    EXPECT_LT(std::chrono::steady_clock::now() - silent, 2000ms); // two waits, with room
    EXPECT_EQ(p.group().activeLinks(), 1u);
}

TEST(HostilePeer, ConfirmLinkNamingAnotherLinkFailsTheFlow)
{
    RawPeer p(test::hostileConfig(Role::Client));
    ASSERT_TRUE(p.start(1));
    PeerEnd* via = p.end();
    std::optional<llc::AddLink> answer = test::offerLink(*via, 2);
    ASSERT_TRUE(answer && !answer->reject);
    ASSERT_TRUE(test::exchangeConts(*via, 2));
    PeerEnd* added = p.end(1);
    ASSERT_TRUE(added);
    llc::ConfirmLink c{added->address.mac, added->address.gid, added->address.qpn, 1, {}, 2, 255};
    ASSERT_TRUE(added->send({1, false, c})); // link 1 on the new link
    std::optional<Message> del = via->next();
    ASSERT_TRUE(del);
    ASSERT_EQ(del->type(), Type::DeleteLink) << "got " << toString(del->type());
    EXPECT_EQ(std::get<llc::DeleteLink>(del->body).linkId, 2);
    EXPECT_TRUE(test::eventually([&] { return p.group().links().size() == 1; }));
    EXPECT_EQ(p.group().activeLinks(), 1u);
    EXPECT_EQ(p.group().stats().linkIdsRefused, 1u);
}

// --- DELETE_RKEY ---------------------------------------------------------------------

// v2 lists up to 255 rkeys: the reply counts the unknown ones (byte 5) and
// carries no list, in 44 bytes, as Linux's does (the finding: a shift by 32
// for the 33rd rkey, and a count of 0).
TEST(HostilePeer, DeleteRkeyV2CountsUnknownRkeys)
{
    RawPeer p(test::hostileConfig(Role::Client));
    ASSERT_TRUE(p.start(1));
    PeerEnd* via = p.end();
    for (std::uint32_t rkey : {0xA1u, 0xA2u, 0xA3u}) {
        ASSERT_TRUE(via->send({1, false, llc::ConfirmRkey{false, false, rkey, 0x1000, {}}}));
        ASSERT_TRUE(via->nextOf(Type::ConfirmRkey, true));
    }
    ASSERT_EQ(p.group().rtokens().used(), 3u);

    llc::DeleteRkey unknown;
    for (std::uint32_t i = 0; i < 40; ++i)
        unknown.rkeys.push_back(0xF000 + i);
    llc::DeleteRkey mixed = unknown;
    mixed.rkeys[0] = 0xA1;
    mixed.rkeys[39] = 0xA3;
    for (const auto& [request, invalid] : {std::pair{unknown, 40}, std::pair{mixed, 38}}) {
        ASSERT_TRUE(via->send({2, false, request}));
        std::size_t size = 0;
        std::optional<Message> reply = via->next(3s, &size);
        ASSERT_TRUE(reply);
        ASSERT_EQ(reply->type(), Type::DeleteRkey);
        EXPECT_TRUE(reply->response);
        EXPECT_EQ(reply->version, 2);
        EXPECT_EQ(size, llc::kMessageSize) << "Linux answers in 44 bytes";
        const auto& d = std::get<llc::DeleteRkey>(reply->body);
        EXPECT_TRUE(d.negative);
        EXPECT_EQ(d.invalidCount, invalid);
        EXPECT_EQ(d.requested, 40) << "byte 4 echoes the request's count";
        EXPECT_TRUE(d.rkeys.empty());
    }
    EXPECT_EQ(p.group().rtokens().used(), 1u) << "0xA2 is left";
}

// v1: bit (7 - i) for each unknown rkey; the request's own byte 5 and NEG
// flag mean nothing and are not echoed.
TEST(HostilePeer, DeleteRkeyV1MasksUnknownRkeysOnly)
{
    RawPeer p(test::hostileConfig(Role::Client));
    ASSERT_TRUE(p.start(1));
    PeerEnd* via = p.end();
    for (std::uint32_t rkey : {0xA1u, 0xA2u}) {
        ASSERT_TRUE(via->send({1, false, llc::ConfirmRkey{false, false, rkey, 0x1000, {}}}));
        ASSERT_TRUE(via->nextOf(Type::ConfirmRkey, true));
    }
    llc::DeleteRkey d{true, 0xff, 0, {0xA1, 0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7}};
    ASSERT_TRUE(via->send({1, false, d}));
    std::optional<Message> reply = via->nextOf(Type::DeleteRkey, true);
    ASSERT_TRUE(reply);
    EXPECT_TRUE(std::get<llc::DeleteRkey>(reply->body).negative);
    EXPECT_EQ(std::get<llc::DeleteRkey>(reply->body).errorMask, 0x7f);
    d = {true, 0xff, 0, {0xA2}};
    ASSERT_TRUE(via->send({1, false, d}));
    reply = via->nextOf(Type::DeleteRkey, true);
    ASSERT_TRUE(reply);
    EXPECT_FALSE(std::get<llc::DeleteRkey>(reply->body).negative);
    EXPECT_EQ(std::get<llc::DeleteRkey>(reply->body).errorMask, 0);
    EXPECT_EQ(p.group().rtokens().used(), 0u);
}

} // namespace
} // namespace smc
