// SPDX-License-Identifier: MIT
// The close state machine, one table row per transition of the connection notes §4.1 (active
// close, shutdown), §4.2 (passive close, peer abort) and §4.3 (abort); then whole closes.
#include "smc/cdc/cdc_close.h"

#include <gtest/gtest.h>

namespace smc::cdc
{
namespace
{

using S = CloseState;
constexpr ConnFlags kNone{};
constexpr ConnFlags kDw{true, false, false};
constexpr ConnFlags kCl{false, true, false};
constexpr ConnFlags kAb{false, false, true};
constexpr ConnFlags kDwCl{true, true, false};
constexpr ConnFlags kDwAb{true, false, true};

enum class Ev { ShutWr, Close, CloseUnread, ShutRdwr, Peer, Abort };

struct Row {
    const char* rule;
    S state;
    ConnFlags sent, received;
    bool released;
    Ev event;
    ConnFlags peer; // Ev::Peer: the flags of the CDC
    S to;
    bool drain;
    ConnFlags send;
};

void PrintTo(const Row& r, std::ostream* os)
{
    *os << r.rule;
}

class CloseTable : public ::testing::TestWithParam<Row>
{
};

TEST_P(CloseTable, Transition)
{
    const Row& r = GetParam();
    CloseMachine m(r.state, r.sent, r.received, r.released);
    CloseAction a;
    switch (r.event) {
    case Ev::ShutWr:
        a = m.shutdownWrite();
        break;
    case Ev::Close:
        a = m.close(false);
        break;
    case Ev::CloseUnread:
        a = m.close(true);
        break;
    case Ev::ShutRdwr:
        a = m.close(false, false);
        break;
    case Ev::Peer:
        a = m.peerFlags(r.peer);
        break;
    case Ev::Abort:
        a = m.abort();
        break;
    }
    EXPECT_EQ(a.from, r.state);
    EXPECT_EQ(name(a.to), name(r.to));
    EXPECT_EQ(m.state(), r.to);
    EXPECT_EQ(a.drain, r.drain);
    EXPECT_EQ(a.send, r.send);
    EXPECT_EQ(a.sends(), r.send.any());
    // Sent flags are sticky: what was sent stays, what is sent now is added.
    ConnFlags sent = r.sent;
    sent |= r.send;
    if (r.event == Ev::Abort)
        sent.peerConnAbort = true;
    EXPECT_EQ(m.sent(), sent);
}

// §4.1 smc_close_active: close() and shutdown(SHUT_RDWR).
INSTANTIATE_TEST_SUITE_P(
    ActiveClose, CloseTable,
    ::testing::Values(
        Row{"ACTIVE: drain, final=closed -> PCW1", S::Active, kNone, kNone, false, Ev::Close, kNone,
            S::PeerCloseWait1, true, kCl},
        Row{"ACTIVE: unread data, final=abort", S::Active, kNone, kNone, false, Ev::CloseUnread,
            kNone, S::PeerCloseWait1, true, kAb},
        Row{"ACTIVE: SHUT_RDWR is the same close", S::Active, kNone, kNone, false, Ev::ShutRdwr,
            kNone, S::PeerCloseWait1, true, kCl},
        Row{"APPFINCLOSEWAIT: only done_writing sent: final -> CLOSED", S::AppFinCloseWait, kDw,
            kCl, false, Ev::Close, kNone, S::Closed, false, kCl},
        Row{"APPFINCLOSEWAIT: unread: final=abort", S::AppFinCloseWait, kDw, kCl, false,
            Ev::CloseUnread, kNone, S::Closed, false, kAb},
        Row{"APPFINCLOSEWAIT: close already sent -> CLOSED", S::AppFinCloseWait, kCl, kCl, false,
            Ev::Close, kNone, S::Closed, false, kNone},
        Row{"APPCLOSEWAIT1: peer shut down: drain, final -> PEERFINCLOSEWAIT", S::AppCloseWait1,
            kNone, kDw, false, Ev::Close, kNone, S::PeerFinCloseWait, true, kCl},
        Row{"APPCLOSEWAIT1: peer closed: no drain, final -> CLOSED", S::AppCloseWait1, kNone, kCl,
            false, Ev::Close, kNone, S::Closed, false, kCl},
        Row{"APPCLOSEWAIT1: peer aborted counts as closed", S::AppCloseWait1, kNone, kAb, false,
            Ev::CloseUnread, kNone, S::Closed, false, kAb},
        Row{"APPCLOSEWAIT2: peer shut down: unread: abort -> PEERFINCLOSEWAIT", S::AppCloseWait2,
            kDw, kDw, false, Ev::CloseUnread, kNone, S::PeerFinCloseWait, true, kAb},
        Row{"APPCLOSEWAIT2: peer closed -> CLOSED", S::AppCloseWait2, kDw, kDwCl, false, Ev::Close,
            kNone, S::Closed, false, kCl},
        Row{"PEERCLOSEWAIT1: only done_writing sent: final, stay", S::PeerCloseWait1, kDw, kNone,
            false, Ev::Close, kNone, S::PeerCloseWait1, false, kCl},
        Row{"PEERCLOSEWAIT1: close sent: stay", S::PeerCloseWait1, kCl, kNone, false, Ev::Close,
            kNone, S::PeerCloseWait1, false, kNone},
        Row{"PEERCLOSEWAIT2: only done_writing sent: final=abort, stay", S::PeerCloseWait2, kDw,
            kDw, false, Ev::CloseUnread, kNone, S::PeerCloseWait2, false, kAb},
        Row{"PEERCLOSEWAIT2: close sent: stay", S::PeerCloseWait2, kDwCl, kDw, false, Ev::Close,
            kNone, S::PeerCloseWait2, false, kNone},
        Row{"PEERFINCLOSEWAIT: stay", S::PeerFinCloseWait, kCl, kDw, false, Ev::Close, kNone,
            S::PeerFinCloseWait, false, kNone},
        Row{"PROCESSABORT: send abort -> CLOSED", S::ProcessAbort, kNone, kAb, false, Ev::Close,
            kNone, S::Closed, false, kAb},
        Row{"PEERABORTWAIT: -> CLOSED", S::PeerAbortWait, kAb, kNone, false, Ev::Close, kNone,
            S::Closed, false, kNone},
        Row{"CLOSED: stay", S::Closed, kCl, kCl, true, Ev::Close, kNone, S::Closed, false, kNone}));

// §4.1 smc_close_shutdown_write.
INSTANTIATE_TEST_SUITE_P(
    ShutdownWrite, CloseTable,
    ::testing::Values(Row{"ACTIVE: drain, done_writing -> PCW1", S::Active, kNone, kNone, false,
                          Ev::ShutWr, kNone, S::PeerCloseWait1, true, kDw},
                      Row{"APPCLOSEWAIT1: drain, done_writing -> ACW2", S::AppCloseWait1, kNone,
                          kDw, false, Ev::ShutWr, kNone, S::AppCloseWait2, true, kDw},
                      Row{"PCW1 unchanged", S::PeerCloseWait1, kDw, kNone, false, Ev::ShutWr, kNone,
                          S::PeerCloseWait1, false, kNone},
                      Row{"PCW2 unchanged", S::PeerCloseWait2, kDw, kDw, false, Ev::ShutWr, kNone,
                          S::PeerCloseWait2, false, kNone},
                      Row{"ACW2 unchanged", S::AppCloseWait2, kDw, kDw, false, Ev::ShutWr, kNone,
                          S::AppCloseWait2, false, kNone},
                      Row{"APPFINCLOSEWAIT unchanged", S::AppFinCloseWait, kDw, kCl, false,
                          Ev::ShutWr, kNone, S::AppFinCloseWait, false, kNone},
                      Row{"PEERFINCLOSEWAIT unchanged", S::PeerFinCloseWait, kCl, kDw, true,
                          Ev::ShutWr, kNone, S::PeerFinCloseWait, false, kNone},
                      Row{"PEERABORTWAIT unchanged", S::PeerAbortWait, kAb, kNone, false,
                          Ev::ShutWr, kNone, S::PeerAbortWait, false, kNone},
                      Row{"PROCESSABORT unchanged", S::ProcessAbort, kNone, kAb, false, Ev::ShutWr,
                          kNone, S::ProcessAbort, false, kNone},
                      Row{"CLOSED unchanged", S::Closed, kCl, kCl, true, Ev::ShutWr, kNone,
                          S::Closed, false, kNone}));

// §4.2 smc_close_passive_abort_received.
INSTANTIATE_TEST_SUITE_P(
    PeerAbort, CloseTable,
    ::testing::Values(Row{"ACTIVE -> PROCESSABORT", S::Active, kNone, kNone, false, Ev::Peer, kAb,
                          S::ProcessAbort, false, kNone},
                      Row{"APPCLOSEWAIT1 -> PROCESSABORT", S::AppCloseWait1, kNone, kDw, false,
                          Ev::Peer, kAb, S::ProcessAbort, false, kNone},
                      Row{"APPFINCLOSEWAIT -> PROCESSABORT", S::AppFinCloseWait, kDw, kCl, false,
                          Ev::Peer, kAb, S::ProcessAbort, false, kNone},
                      Row{"PCW1, only done_writing sent -> PROCESSABORT", S::PeerCloseWait1, kDw,
                          kNone, false, Ev::Peer, kAb, S::ProcessAbort, false, kNone},
                      Row{"PCW1, close sent -> CLOSED", S::PeerCloseWait1, kCl, kNone, true,
                          Ev::Peer, kAb, S::Closed, false, kNone},
                      Row{"PCW2, only done_writing sent -> PROCESSABORT", S::PeerCloseWait2, kDw,
                          kDw, false, Ev::Peer, kDwAb, S::ProcessAbort, false, kNone},
                      Row{"PCW2, close sent -> CLOSED", S::PeerCloseWait2, kDwCl, kDw, true,
                          Ev::Peer, kAb, S::Closed, false, kNone},
                      Row{"APPCLOSEWAIT2 -> CLOSED", S::AppCloseWait2, kDw, kDw, false, Ev::Peer,
                          kAb, S::Closed, false, kNone},
                      Row{"PEERFINCLOSEWAIT -> CLOSED", S::PeerFinCloseWait, kCl, kDw, true,
                          Ev::Peer, kAb, S::Closed, false, kNone},
                      Row{"PEERABORTWAIT -> CLOSED", S::PeerAbortWait, kAb, kNone, false, Ev::Peer,
                          kAb, S::Closed, false, kNone},
                      Row{"PROCESSABORT stays", S::ProcessAbort, kNone, kAb, false, Ev::Peer, kAb,
                          S::ProcessAbort, false, kNone},
                      Row{"CLOSED stays", S::Closed, kCl, kNone, true, Ev::Peer, kAb, S::Closed,
                          false, kNone}));

// §4.2 smc_close_passive_work without abort.
INSTANTIATE_TEST_SUITE_P(
    PassiveClose, CloseTable,
    ::testing::Values(
        Row{"ACTIVE + done_writing -> ACW1", S::Active, kNone, kNone, false, Ev::Peer, kDw,
            S::AppCloseWait1, false, kNone},
        Row{"ACTIVE + closed -> ACW1", S::Active, kNone, kNone, false, Ev::Peer, kCl,
            S::AppCloseWait1, false, kNone},
        Row{"ACTIVE + no flags: nothing", S::Active, kNone, kNone, false, Ev::Peer, kNone,
            S::Active, false, kNone},
        Row{"PCW1 + done_writing -> PCW2", S::PeerCloseWait1, kDw, kNone, false, Ev::Peer, kDw,
            S::PeerCloseWait2, false, kNone},
        Row{"PCW1 + closed, released, close sent -> CLOSED", S::PeerCloseWait1, kCl, kNone, true,
            Ev::Peer, kCl, S::Closed, false, kNone},
        Row{"PCW1 + done_writing+closed, released, close sent -> CLOSED", S::PeerCloseWait1, kCl,
            kNone, true, Ev::Peer, kDwCl, S::Closed, false, kNone},
        Row{"PCW1 + closed, only shut down -> APPFINCLOSEWAIT", S::PeerCloseWait1, kDw, kNone,
            false, Ev::Peer, kCl, S::AppFinCloseWait, false, kNone},
        Row{"PCW1 + closed, SHUT_RDWR (not released) -> APPFINCLOSEWAIT", S::PeerCloseWait1, kCl,
            kNone, false, Ev::Peer, kCl, S::AppFinCloseWait, false, kNone},
        Row{"PCW2 + done_writing again: stay", S::PeerCloseWait2, kDw, kDw, false, Ev::Peer, kDw,
            S::PeerCloseWait2, false, kNone},
        Row{"PCW2 + closed, released, close sent -> CLOSED", S::PeerCloseWait2, kDwCl, kDw, true,
            Ev::Peer, kDwCl, S::Closed, false, kNone},
        Row{"PCW2 + closed, only shut down -> APPFINCLOSEWAIT", S::PeerCloseWait2, kDw, kDw, false,
            Ev::Peer, kDwCl, S::AppFinCloseWait, false, kNone},
        Row{"PEERFINCLOSEWAIT + closed -> CLOSED", S::PeerFinCloseWait, kCl, kDw, true, Ev::Peer,
            kDwCl, S::Closed, false, kNone},
        Row{"PEERFINCLOSEWAIT + done_writing: stay", S::PeerFinCloseWait, kCl, kDw, true, Ev::Peer,
            kDw, S::PeerFinCloseWait, false, kNone},
        Row{"ACW1 + closed: stay (the application closes)", S::AppCloseWait1, kNone, kDw, false,
            Ev::Peer, kDwCl, S::AppCloseWait1, false, kNone},
        Row{"ACW2 + closed: stay", S::AppCloseWait2, kDw, kDw, false, Ev::Peer, kDwCl,
            S::AppCloseWait2, false, kNone},
        Row{"APPFINCLOSEWAIT: nothing", S::AppFinCloseWait, kDw, kCl, false, Ev::Peer, kCl,
            S::AppFinCloseWait, false, kNone},
        Row{"PEERABORTWAIT: nothing", S::PeerAbortWait, kAb, kNone, false, Ev::Peer, kCl,
            S::PeerAbortWait, false, kNone},
        Row{"PROCESSABORT: nothing", S::ProcessAbort, kNone, kAb, false, Ev::Peer, kCl,
            S::ProcessAbort, false, kNone},
        Row{"CLOSED: nothing", S::Closed, kCl, kCl, true, Ev::Peer, kCl, S::Closed, false, kNone}));

// §4.3: the link or the peer is gone; nothing can be sent.
INSTANTIATE_TEST_SUITE_P(
    Abort, CloseTable,
    ::testing::Values(
        Row{"ACTIVE", S::Active, kNone, kNone, false, Ev::Abort, kNone, S::Closed, false, kNone},
        Row{"PCW1", S::PeerCloseWait1, kDw, kNone, false, Ev::Abort, kNone, S::Closed, false,
            kNone},
        Row{"PCW2", S::PeerCloseWait2, kDw, kDw, false, Ev::Abort, kNone, S::Closed, false, kNone},
        Row{"ACW1", S::AppCloseWait1, kNone, kDw, false, Ev::Abort, kNone, S::Closed, false, kNone},
        Row{"ACW2", S::AppCloseWait2, kDw, kDw, false, Ev::Abort, kNone, S::Closed, false, kNone},
        Row{"APPFINCLOSEWAIT", S::AppFinCloseWait, kDw, kCl, false, Ev::Abort, kNone, S::Closed,
            false, kNone},
        Row{"PEERFINCLOSEWAIT", S::PeerFinCloseWait, kCl, kDw, true, Ev::Abort, kNone, S::Closed,
            false, kNone},
        Row{"PEERABORTWAIT", S::PeerAbortWait, kAb, kNone, false, Ev::Abort, kNone, S::Closed,
            false, kNone},
        Row{"PROCESSABORT", S::ProcessAbort, kNone, kAb, false, Ev::Abort, kNone, S::Closed, false,
            kNone},
        Row{"CLOSED", S::Closed, kCl, kCl, true, Ev::Abort, kNone, S::Closed, false, kNone}));

// Two machines, each CDC's flags handed to the other: the orderly closes end CLOSED on both.
struct Pair {
    CloseMachine a, b;
    void toB(const CloseAction& x)
    {
        if (x.sends())
            (void)b.peerFlags(a.sent());
    }
    void toA(const CloseAction& x)
    {
        if (x.sends())
            (void)a.peerFlags(b.sent());
    }
};

TEST(CloseSequence, BothCloseOneAfterTheOther)
{
    Pair p;
    p.toB(p.a.close(false));
    EXPECT_EQ(p.a.state(), S::PeerCloseWait1);
    EXPECT_EQ(p.b.state(), S::AppCloseWait1);
    p.toA(p.b.close(false));
    EXPECT_EQ(p.b.state(), S::Closed); // the peer had closed
    EXPECT_EQ(p.a.state(), S::Closed); // released, close sent
}

TEST(CloseSequence, ShutdownThenClose)
{
    Pair p;
    p.toB(p.a.shutdownWrite()); // a: PCW1, b: ACW1
    p.toA(p.b.shutdownWrite()); // b: ACW2, a: PCW2
    EXPECT_EQ(p.a.state(), S::PeerCloseWait2);
    EXPECT_EQ(p.b.state(), S::AppCloseWait2);
    p.toB(p.a.close(false)); // a: final, stays PCW2; b: stays ACW2 (its app closes)
    EXPECT_EQ(p.a.state(), S::PeerCloseWait2);
    p.toA(p.b.close(false)); // b: peer closed -> CLOSED; a: closed received -> CLOSED
    EXPECT_EQ(p.b.state(), S::Closed);
    EXPECT_EQ(p.a.state(), S::Closed);
}

TEST(CloseSequence, CloseWithUnreadDataAborts)
{
    Pair p;
    const CloseAction x = p.a.close(true);
    EXPECT_TRUE(x.send.peerConnAbort);
    p.toB(x);
    EXPECT_EQ(p.b.state(), S::ProcessAbort);
    p.toA(p.b.close(false)); // PROCESSABORT: abort -> CLOSED
    EXPECT_EQ(p.b.state(), S::Closed);
    EXPECT_EQ(p.a.state(), S::Closed); // PCW1, close sent, abort received
}

TEST(CloseSequence, HalfCloseWhileThePeerStillWrites)
{
    Pair p;
    p.toB(p.a.shutdownWrite()); // a: PCW1 (a can still read), b: ACW1
    p.toA(p.b.close(false));    // b saw only done_writing: PEERFINCLOSEWAIT
    EXPECT_EQ(p.b.state(), S::PeerFinCloseWait);
    EXPECT_EQ(p.a.state(), S::AppFinCloseWait); // a got closed but has not closed itself
    p.toB(p.a.close(false));                    // a: final -> CLOSED
    EXPECT_EQ(p.a.state(), S::Closed);
    EXPECT_EQ(p.b.state(), S::Closed);
}

} // namespace
} // namespace smc::cdc
