// SPDX-License-Identifier: MIT
// CdcStream: send/receive accounting over many wraps against a model, the window update rule,
// and crafted CDCs that must be refused without changing anything.
#include "smc/cdc/cdc_stream.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "smc/cdc/cdc_ring.h"

namespace smc::cdc
{
namespace
{

using Bytes = std::vector<std::byte>;

CdcStream make(std::size_t ring, std::size_t peerRing, std::uint32_t token = 0)
{
    return std::move(CdcStream::create(ring, peerRing, token)).value();
}

std::error_code errorOf(const Result<void>& r)
{
    return r ? std::error_code{} : r.error();
}

// Everything a caller can observe, to show that a refused message changed nothing.
struct Snapshot {
    std::size_t sendSpace, readable, toConfirm;
    Cursor producer, consumer, peerProducer, peerConsumer, advertised;
    ConnFlags peerConn;
    ProducerFlags peerProducerFlags;
    bool want;
    friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

Snapshot snap(const CdcStream& s)
{
    return {s.sendSpace(),     s.readable(),          s.toConfirm(),         s.producer(),
            s.consumer(),      s.peerProducer(),      s.peerConsumer(),      s.advertised(),
            s.peerConnFlags(), s.peerProducerFlags(), s.wantConsumerUpdate()};
}

TEST(CdcStream, CreateRefusesBadRingSizes)
{
    EXPECT_EQ(CdcStream::create(0, 100).error(), CdcErrc::BadRingSize);
    EXPECT_EQ(CdcStream::create(100, 0).error(), CdcErrc::BadRingSize);
    EXPECT_EQ(CdcStream::create(kMaxRingSize + 1, 100).error(), CdcErrc::BadRingSize);
    EXPECT_EQ(std::error_code(CdcErrc::BadRingSize), std::errc::invalid_argument);
    EXPECT_TRUE(CdcStream::create(kMaxRingSize, 1));
}

TEST(CdcStream, ProduceAndConsumeStayInsideTheirRings)
{
    CdcStream s = make(1000, 500);
    EXPECT_EQ(s.sendSpace(), 500u);
    EXPECT_EQ(errorOf(s.produce(501)), CdcErrc::ExceedsSpace);
    EXPECT_TRUE(s.produce(500));
    EXPECT_EQ(s.sendSpace(), 0u);
    EXPECT_EQ(s.producer(), (Cursor{1, 0}));
    EXPECT_EQ(errorOf(s.produce(1)), CdcErrc::ExceedsSpace);
    EXPECT_EQ(errorOf(s.consume(1)), CdcErrc::ExceedsReadable);
    EXPECT_EQ(s.readable(), 0u);
}

TEST(CdcStream, NextCdcCarriesCursorsSequenceAndStickyFlags)
{
    CdcStream s = make(1000, 500, 0xabcd);
    ASSERT_TRUE(s.produce(120));
    CdcMessage m = s.nextCdc();
    EXPECT_EQ(m.seq, 1);
    EXPECT_EQ(m.token, 0xabcdu);
    EXPECT_EQ(m.producer, (Cursor{0, 120}));
    EXPECT_EQ(m.consumer, (Cursor{0, 0}));
    EXPECT_FALSE(m.producerFlags.writeBlocked);
    EXPECT_FALSE(m.connFlags.any());
    EXPECT_TRUE(s.nextCdc(380).producerFlags.writeBlocked == false); // 380 fits exactly
    EXPECT_TRUE(s.nextCdc(381).producerFlags.writeBlocked);
    ConnFlags done;
    done.peerDoneWriting = true;
    s.addConnFlags(done);
    s.addConnFlags({});
    m = s.nextCdc();
    EXPECT_EQ(m.seq, 4);
    EXPECT_TRUE(m.connFlags.peerDoneWriting);
    ASSERT_TRUE(s.produce(380)); // the peer ring is now full: write blocked
    EXPECT_TRUE(s.nextCdc().producerFlags.writeBlocked);
}

// Two streams over real rings: A sends random amounts into B's ring (SMC-R codec on the way),
// B reads them back in random amounts and answers with consumer updates when the window rule
// says so (the SMC-D head on the way). A model of total bytes checks every count after every
// step, and the bytes themselves arrive in order across thousands of wraps.
TEST(CdcStream, AccountingOverManyWrapsMatchesAModel)
{
    // {ring, steps}: ring 1 wraps at every byte, so its wrap passes 0xFFFF -> 0.
    const std::pair<std::size_t, int> runs[] = {
        {16384, 5000}, {65536, 2000}, {3000, 20000}, {1, 300000}};
    for (const auto& [ring, steps] : runs) {
        std::mt19937 rng(static_cast<unsigned>(ring));
        CdcStream a = make(ring * 2, ring); // a's own ring is not used here
        CdcStream b = make(ring, ring * 2);
        Bytes bRing(ring);
        alignas(8) std::byte aHead[kSmcdHeadSize] = {};
        std::uint64_t produced = 0, consumed = 0, advertised = 0;
        std::uint8_t nextOut = 0, nextIn = 0;
        for (int step = 0; step < steps; ++step) {
            // A: write what fits, then a CDC.
            const std::size_t want = rng() % (ring + 1);
            const std::size_t n = std::min(want, a.sendSpace());
            Bytes data(n);
            for (auto& x : data)
                x = std::byte(nextOut++);
            ASSERT_EQ(copyToRing(bRing, a.producer().count, data), n);
            ASSERT_TRUE(a.produce(n));
            produced += n;
            const auto wire = encodeSmcr(a.nextCdc(want - n));
            Result<CdcMessage> m = decodeSmcr(wire);
            ASSERT_TRUE(m);
            ASSERT_TRUE(b.onPeerCdc(*m)) << "step " << step;
            ASSERT_EQ(b.readable(), produced - consumed);
            // B: read some of it.
            const std::size_t r = rng() % (b.readable() + 1);
            Bytes out(r);
            ASSERT_EQ(copyFromRing(bRing, b.consumer().count, out), r);
            for (auto x : out)
                ASSERT_EQ(x, std::byte(nextIn++));
            ASSERT_TRUE(b.consume(r));
            consumed += r;
            ASSERT_EQ(b.toConfirm(), consumed - advertised);
            if (b.wantConsumerUpdate() || rng() % 50 == 0) {
                publishSmcd(aHead, b.nextCdc());
                advertised = consumed;
                ASSERT_TRUE(a.onPeerCdc(readSmcd(aHead)));
            }
            ASSERT_EQ(a.sendSpace(), ring - (produced - advertised));
            ASSERT_LE(b.readable(), ring);
        }
        EXPECT_GT(produced, 100 * ring) << "ring " << ring; // many wraps
        if (ring == 1) {
            EXPECT_GT(produced, 0x10000u); // the wrap counter itself wrapped
        }
    }
}

TEST(CdcStream, WindowLimitIsLinuxsRule)
{
    EXPECT_EQ(windowUpdateLimit(16384), 2304u);
    EXPECT_EQ(windowUpdateLimit(65536), 6553u);
    EXPECT_EQ(windowUpdateLimit(1 << 20), 104857u);
    EXPECT_EQ(windowUpdateLimit(3000), 1500u); // below Linux's smallest ring: half of it
}

// B's ring is 64 KiB (limit 6553). The peer has written `written`, B consumed `consumed`.
struct WindowCase {
    std::size_t written, consumed;
    bool peerWriteBlocked, peerAsks, want;
};

void PrintTo(const WindowCase& c, std::ostream* os)
{
    *os << "written " << c.written << " consumed " << c.consumed << " blocked "
        << c.peerWriteBlocked << " asks " << c.peerAsks;
}

class WindowTest : public ::testing::TestWithParam<WindowCase>
{
};

TEST_P(WindowTest, WantConsumerUpdate)
{
    const WindowCase& c = GetParam();
    CdcStream b = make(65536, 65536);
    CdcMessage m;
    m.producer = {0, static_cast<std::uint32_t>(c.written)};
    if (c.written == 65536)
        m.producer = {1, 0};
    m.producerFlags.writeBlocked = c.peerWriteBlocked;
    m.producerFlags.consCursUpdReq = c.peerAsks;
    ASSERT_TRUE(b.onPeerCdc(m));
    ASSERT_TRUE(b.consume(c.consumed));
    EXPECT_EQ(b.wantConsumerUpdate(), c.want);
    (void)b.nextCdc();
    EXPECT_FALSE(b.wantConsumerUpdate()); // answered: nothing to confirm, request cleared
}

INSTANTIATE_TEST_SUITE_P(
    Cases, WindowTest,
    ::testing::Values(WindowCase{10000, 6553, false, false, false}, // not above the limit
                      WindowCase{10000, 6553, true, false, false},  // ... even if blocked
                      WindowCase{10000, 6554, false, false, false}, // sender sees 55536 free
                      WindowCase{10000, 6554, true, false, true},   // ... but it is blocked
                      WindowCase{32768, 7000, false, false, true},  // sender sees half free
                      WindowCase{32767, 7000, false, false, false}, // sender sees more
                      WindowCase{65536, 65536, false, false, true}, // full ring, all read
                      WindowCase{100, 0, false, true, true},        // the peer asked
                      WindowCase{0, 0, false, false, false}));

TEST(CdcStream, PeerWriteBlockedIsForgottenOnceAllIsRead)
{
    CdcStream b = make(65536, 65536);
    CdcMessage m;
    m.producer = {0, 10000};
    m.producerFlags.writeBlocked = true;
    ASSERT_TRUE(b.onPeerCdc(m));
    ASSERT_TRUE(b.consume(5000));
    (void)b.nextCdc();
    EXPECT_TRUE(b.peerProducerFlags().writeBlocked); // 5000 left to read
    ASSERT_TRUE(b.consume(5000));
    (void)b.nextCdc();
    EXPECT_FALSE(b.peerProducerFlags().writeBlocked);
}

// A stream in mid-flight: B's ring 1000, 2 wraps done, 300 readable, 100 consumed since the
// last advertisement; B produced 400 into the peer's ring of 800, 150 of it consumed.
CdcStream midFlight()
{
    CdcStream b = make(1000, 800);
    CdcMessage m;
    for (int i = 0; i < 5; ++i) { // five rounds of 400 bytes: the producer at {2, 0}
        m.producer = advance(m.producer, 400, 1000);
        EXPECT_TRUE(b.onPeerCdc(m));
        EXPECT_TRUE(b.consume(400));
        (void)b.nextCdc();
    }
    m.producer = advance(m.producer, 400, 1000);
    EXPECT_TRUE(b.onPeerCdc(m));
    EXPECT_TRUE(b.consume(100));
    EXPECT_TRUE(b.produce(400));
    m.consumer = {0, 150};
    EXPECT_TRUE(b.onPeerCdc(m));
    EXPECT_EQ(b.readable(), 300u);
    EXPECT_EQ(b.toConfirm(), 100u);
    EXPECT_EQ(b.sendSpace(), 550u);
    return b;
}

struct CraftedCase {
    const char* what;
    Cursor producer, consumer;
    CdcErrc error;
};

void PrintTo(const CraftedCase& c, std::ostream* os)
{
    *os << c.what;
}

class CraftedTest : public ::testing::TestWithParam<CraftedCase>
{
};

TEST_P(CraftedTest, IsRefusedAndChangesNothing)
{
    const CraftedCase& c = GetParam();
    CdcStream b = midFlight();
    const Snapshot before = snap(b);
    CdcMessage m;
    m.producer = c.producer;
    m.consumer = c.consumer;
    m.connFlags.peerConnAbort = true;      // must not be taken either
    m.producerFlags.consCursUpdReq = true; // nor this
    EXPECT_EQ(errorOf(b.onPeerCdc(m)), c.error) << c.what;
    EXPECT_EQ(snap(b), before) << c.what;
}

// midFlight: peer producer {2, 400}, advertised {2, 0}; peer consumer {0, 150}, producer {0, 400}.
INSTANTIATE_TEST_SUITE_P(
    Cases, CraftedTest,
    ::testing::Values(
        CraftedCase{
            "producer count outside the ring", {2, 1000}, {0, 150}, CdcErrc::CursorOutOfRange},
        CraftedCase{"producer count huge", {2, 0xffffffff}, {0, 150}, CdcErrc::CursorOutOfRange},
        CraftedCase{"producer more than a ring past what we advertised",
                    {3, 1},
                    {0, 150},
                    CdcErrc::CursorTooFar},
        CraftedCase{"producer wraps ahead", {0x7002, 400}, {0, 150}, CdcErrc::CursorTooFar},
        CraftedCase{"producer behind the last one", {2, 399}, {0, 150}, CdcErrc::CursorBackwards},
        CraftedCase{"producer behind our consumer", {1, 900}, {0, 150}, CdcErrc::CursorBackwards},
        CraftedCase{
            "consumer count outside the peer ring", {2, 400}, {0, 800}, CdcErrc::CursorOutOfRange},
        CraftedCase{"consumer behind the last one", {2, 400}, {0, 149}, CdcErrc::CursorBackwards},
        CraftedCase{
            "consumer beyond our producer", {2, 400}, {0, 401}, CdcErrc::CursorBeyondProducer},
        CraftedCase{"consumer a lap ahead", {2, 400}, {1, 100}, CdcErrc::CursorBeyondProducer},
        CraftedCase{"consumer two laps ahead", {2, 400}, {2, 150}, CdcErrc::CursorTooFar}));

TEST(CdcStream, HonestEdgesAreAccepted)
{
    CdcStream b = midFlight();
    CdcMessage m;
    m.producer = {3, 0};   // exactly one ring past the advertised {2, 0}
    m.consumer = {0, 400}; // everything we produced
    ASSERT_TRUE(b.onPeerCdc(m));
    EXPECT_EQ(b.readable(), 900u);
    EXPECT_EQ(b.sendSpace(), 800u);
    ASSERT_TRUE(b.onPeerCdc(m)); // the same again (an equal sequence number): no change
    EXPECT_EQ(b.readable(), 900u);
}

TEST(CdcStream, FailoverValidationChangesNothing)
{
    CdcStream b = midFlight();
    const Snapshot before = snap(b);
    CdcMessage m; // zero cursors, which would be backwards
    m.producerFlags.failoverValidation = true;
    EXPECT_TRUE(b.onPeerCdc(m));
    EXPECT_EQ(snap(b), before);
}

TEST(CdcStream, PeerConnectionFlagsAreSticky)
{
    CdcStream b = midFlight();
    CdcMessage m;
    m.producer = {2, 400};
    m.consumer = {0, 150};
    m.connFlags.peerDoneWriting = true;
    ASSERT_TRUE(b.onPeerCdc(m));
    m.connFlags = {};
    ASSERT_TRUE(b.onPeerCdc(m));
    EXPECT_TRUE(b.peerConnFlags().peerDoneWriting);
}

} // namespace
} // namespace smc::cdc
