// SPDX-License-Identifier: MIT
// CDC primitives: cursor arithmetic and validation, SMC-R golden bytes, the SMC-D head, ring
// copies, and CdcStream accounting against a model, the window rule and crafted messages.
#include "smc/cdc/cdc_stream.h"

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "smc/cdc/cdc_messages.h"
#include "smc/cdc/cdc_ring.h"

namespace smc::cdc
{
namespace
{

using Bytes = std::vector<std::byte>;

std::error_code errorOf(const Result<std::size_t>& r)
{
    return r ? std::error_code{} : r.error();
}

// ---- cursors

TEST(CdcCursor, AdvanceWrapsCountAndWrap)
{
    EXPECT_EQ(advance({0, 0}, 10, 100), (Cursor{0, 10}));
    EXPECT_EQ(advance({0, 90}, 10, 100), (Cursor{1, 0}));
    EXPECT_EQ(advance({0, 90}, 15, 100), (Cursor{1, 5}));
    EXPECT_EQ(advance({3, 50}, 250, 100), (Cursor{6, 0})); // several wraps at once
    EXPECT_EQ(advance({0xffff, 99}, 1, 100), (Cursor{0, 0}));
    EXPECT_EQ(advance({0xffff, 60}, 150, 100), (Cursor{1, 10}));
    EXPECT_EQ(advance({7, 0}, 0, 100), (Cursor{7, 0}));
}

TEST(CdcCursor, DiffIsLinuxCursDiff)
{
    EXPECT_EQ(diff(100, {0, 10}, {0, 30}), 20u);
    EXPECT_EQ(diff(100, {0, 90}, {1, 20}), 30u);
    EXPECT_EQ(diff(100, {0xffff, 90}, {0, 20}), 30u);
    EXPECT_EQ(diff(100, {0, 40}, {1, 40}), 100u); // a full ring
    EXPECT_EQ(diff(100, {0, 30}, {0, 10}), 0u);   // clamped, never negative
    EXPECT_EQ(diff(100, {5, 5}, {5, 5}), 0u);
}

TEST(CdcCursor, DiffLargeCountsSeveralWrapsCappedAtSize)
{
    EXPECT_EQ(diffLarge(100, {0, 10}, {0, 30}), 20u);
    EXPECT_EQ(diffLarge(100, {0, 30}, {0, 10}), 0u);
    EXPECT_EQ(diffLarge(100, {0, 90}, {1, 20}), 30u);
    EXPECT_EQ(diffLarge(100, {0, 90}, {2, 20}), 100u); // 130, capped
    EXPECT_EQ(diffLarge(100, {0xffff, 90}, {0, 20}), 30u);
    EXPECT_EQ(diffLarge(100, {0xfffe, 90}, {0, 0}), 100u); // 110 across 0xFFFF -> 0, capped
    EXPECT_EQ(diffLarge(1000, {0xfffe, 900}, {0, 50}), 1000u);
    EXPECT_EQ(diffLarge(100, {0, 50}, {1, 40}), 90u);
}

TEST(CdcCursor, ReceiveRuleNeverMovesBackwards)
{
    const Cursor cur{5, 50};
    EXPECT_TRUE(isOlder(cur, {5, 49}));
    EXPECT_TRUE(isOlder(cur, {4, 99}));
    EXPECT_FALSE(isOlder(cur, {5, 50}));
    EXPECT_FALSE(isOlder(cur, {5, 51}));
    EXPECT_FALSE(isOlder(cur, {6, 0}));
    EXPECT_FALSE(isOlder({0xffff, 70}, {0, 3})); // wrap 0 is 0xFFFF -> 0
    EXPECT_TRUE(isNewer(cur, {5, 51}));
    EXPECT_FALSE(isNewer(cur, cur));
    EXPECT_FALSE(isNewer(cur, {5, 10}));
    EXPECT_EQ(accept(cur, {5, 10}), cur);
    EXPECT_EQ(accept(cur, {5, 60}), (Cursor{5, 60}));
    EXPECT_EQ(accept({0xffff, 70}, {0, 3}), (Cursor{0, 3}));
}

TEST(CdcCursor, ValidateAcceptsAtMostOneRingAhead)
{
    EXPECT_EQ(*validateCursor(100, {3, 40}, {3, 40}), 0u);
    EXPECT_EQ(*validateCursor(100, {3, 40}, {3, 99}), 59u);
    EXPECT_EQ(*validateCursor(100, {3, 40}, {4, 0}), 60u);
    EXPECT_EQ(*validateCursor(100, {3, 40}, {4, 40}), 100u); // exactly a ring
    EXPECT_EQ(*validateCursor(100, {0xffff, 40}, {0, 10}), 70u);
}

TEST(CdcCursor, ValidateRejectsCraftedCursors)
{
    EXPECT_EQ(errorOf(validateCursor(100, {3, 40}, {3, 100})), CdcErrc::CursorOutOfRange);
    EXPECT_EQ(errorOf(validateCursor(100, {3, 40}, {3, 0xffffffff})), CdcErrc::CursorOutOfRange);
    EXPECT_EQ(errorOf(validateCursor(100, {3, 40}, {3, 39})), CdcErrc::CursorBackwards);
    EXPECT_EQ(errorOf(validateCursor(100, {3, 40}, {2, 90})), CdcErrc::CursorBackwards);
    EXPECT_EQ(errorOf(validateCursor(100, {0, 40}, {0xffff, 90})), CdcErrc::CursorBackwards);
    EXPECT_EQ(errorOf(validateCursor(100, {3, 40}, {4, 41})), CdcErrc::CursorTooFar);
    EXPECT_EQ(errorOf(validateCursor(100, {3, 40}, {5, 0})), CdcErrc::CursorTooFar);
    EXPECT_EQ(errorOf(validateCursor(100, {3, 40}, {0x8003, 40})), CdcErrc::CursorTooFar);
}

// ---- SMC-R wire form

CdcMessage sample()
{
    CdcMessage m;
    m.seq = 0x1234;
    m.token = 0xa1b2c3d4;
    m.producer = {0x0102, 0x00030405};
    m.consumer = {0xfffe, 0x0000fff0};
    m.producerFlags.writeBlocked = true;
    m.producerFlags.consCursUpdReq = true;
    m.connFlags.peerDoneWriting = true;
    m.connFlags.peerConnAbort = true;
    return m;
}

// The bytes of sample(), field by field from the connection notes §2.1.
Bytes sampleGolden()
{
    Bytes b(44, std::byte{0});
    b[0] = std::byte{0xfe}; // type
    b[1] = std::byte{44};   // length
    b[2] = std::byte{0x12}; // seq, BE16
    b[3] = std::byte{0x34};
    b[4] = std::byte{0xa1}; // token, BE32
    b[5] = std::byte{0xb2};
    b[6] = std::byte{0xc3};
    b[7] = std::byte{0xd4};
    // 8, 9: producer reserved
    b[10] = std::byte{0x01}; // producer wrap
    b[11] = std::byte{0x02};
    b[12] = std::byte{0x00}; // producer count
    b[13] = std::byte{0x03};
    b[14] = std::byte{0x04};
    b[15] = std::byte{0x05};
    // 16, 17: consumer reserved
    b[18] = std::byte{0xff}; // consumer wrap
    b[19] = std::byte{0xfe};
    b[20] = std::byte{0x00}; // consumer count
    b[21] = std::byte{0x00};
    b[22] = std::byte{0xff};
    b[23] = std::byte{0xf0};
    b[24] = std::byte{0x80 | 0x10}; // write_blocked, cons_curs_upd_req
    b[25] = std::byte{0x80 | 0x20}; // peer_done_writing, peer_conn_abort
    return b;
}

TEST(CdcSmcr, EncodeWritesTheGoldenBytes)
{
    const auto wire = encodeSmcr(sample());
    EXPECT_EQ(Bytes(wire.begin(), wire.end()), sampleGolden());
}

TEST(CdcSmcr, DecodeReadsTheGoldenBytes)
{
    Result<CdcMessage> m = decodeSmcr(sampleGolden());
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(*m, sample());
}

TEST(CdcSmcr, EveryFlagHasItsBit)
{
    const std::pair<std::uint8_t, ProducerFlags> producer[] = {
        {0x80, {true, false, false, false, false}}, {0x40, {false, true, false, false, false}},
        {0x20, {false, false, true, false, false}}, {0x10, {false, false, false, true, false}},
        {0x08, {false, false, false, false, true}},
    };
    for (const auto& [bit, flags] : producer) {
        EXPECT_EQ(toByte(flags), bit);
        EXPECT_EQ(producerFlagsFrom(bit), flags);
    }
    const std::pair<std::uint8_t, ConnFlags> conn[] = {
        {0x80, {true, false, false}}, {0x40, {false, true, false}}, {0x20, {false, false, true}}};
    for (const auto& [bit, flags] : conn) {
        EXPECT_EQ(toByte(flags), bit);
        EXPECT_EQ(connFlagsFrom(bit), flags);
    }
}

TEST(CdcSmcr, ReservedBitsAndBytesAreIgnored)
{
    Bytes b = sampleGolden();
    b[8] = b[9] = b[16] = b[17] = std::byte{0x5a};
    b[24] |= std::byte{0x07};
    b[25] |= std::byte{0x1f};
    for (std::size_t i = 26; i < 44; ++i)
        b[i] = std::byte{0xee};
    b.resize(48, std::byte{0x77}); // a receive slot is 48 bytes
    Result<CdcMessage> m = decodeSmcr(b);
    ASSERT_TRUE(m);
    EXPECT_EQ(*m, sample());
    // Linux reads a completion of 26 bytes or more.
    b.resize(kSmcrCdcMinSize);
    EXPECT_TRUE(decodeSmcr(b));
}

TEST(CdcSmcr, MalformedInputIsRefused)
{
    const auto errorOfDecode = [](const Bytes& b) {
        Result<CdcMessage> m = decodeSmcr(b);
        return m ? std::error_code{} : m.error();
    };
    Bytes b = sampleGolden();
    b.resize(kSmcrCdcMinSize - 1);
    EXPECT_EQ(errorOfDecode(b), CdcErrc::Truncated);
    EXPECT_EQ(errorOfDecode({}), CdcErrc::Truncated);
    b = sampleGolden();
    b[0] = std::byte{0x01}; // an LLC message type
    EXPECT_EQ(errorOfDecode(b), CdcErrc::BadType);
    b = sampleGolden();
    b[1] = std::byte{48};
    EXPECT_EQ(errorOfDecode(b), CdcErrc::BadLength);
    EXPECT_EQ(std::error_code(CdcErrc::BadLength), std::errc::protocol_error);
}

TEST(CdcSmcr, RoundTripsRandomMessages)
{
    std::mt19937 rng(7);
    for (int i = 0; i < 1000; ++i) {
        CdcMessage m;
        m.seq = static_cast<std::uint16_t>(rng());
        m.token = static_cast<std::uint32_t>(rng());
        m.producer = {static_cast<std::uint16_t>(rng()), static_cast<std::uint32_t>(rng())};
        m.consumer = {static_cast<std::uint16_t>(rng()), static_cast<std::uint32_t>(rng())};
        m.producerFlags = producerFlagsFrom(static_cast<std::uint8_t>(rng()));
        m.connFlags = connFlagsFrom(static_cast<std::uint8_t>(rng()));
        const auto wire = encodeSmcr(m);
        Result<CdcMessage> back = decodeSmcr(wire);
        ASSERT_TRUE(back);
        EXPECT_EQ(*back, m);
    }
}

TEST(CdcSmcr, StaleSequenceNumbers)
{
    EXPECT_FALSE(isStaleSeq(10, 10)); // equal: processed again
    EXPECT_FALSE(isStaleSeq(10, 11));
    EXPECT_TRUE(isStaleSeq(10, 9));
    EXPECT_FALSE(isStaleSeq(0xffff, 0)); // wraps
    EXPECT_TRUE(isStaleSeq(0, 0xffff));
}

// ---- SMC-D head

TEST(CdcSmcd, PublishWritesLittleEndianHalvesAndLeavesTheRestAlone)
{
    alignas(8) std::byte head[kSmcdHeadSize];
    std::memset(head, 0xcc, sizeof head);
    CdcMessage m = sample();
    publishSmcd(head, m);
    const std::uint8_t want[kSmcdHeadSize] = {
        0xfe, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, // type, bytes 1..7 untouched
        0x02, 0x01, 0x05, 0x04, 0x03, 0x00, 0x00, 0x00, // producer wrap, count LE; 0, 0
        0xfe, 0xff, 0xf0, 0xff, 0x00, 0x00, 0x90, 0xa0, // consumer wrap, count LE; flags
        0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, // the doorbell: untouched
    };
    for (std::size_t i = 0; i < kSmcdHeadSize; ++i)
        EXPECT_EQ(std::to_integer<std::uint8_t>(head[i]), want[i]) << "byte " << i;
    EXPECT_EQ(kSmcdDoorbellOffset, 24u);

    CdcMessage back = readSmcd(head);
    m.seq = 0; // not in the SMC-D form
    m.token = 0;
    EXPECT_EQ(back, m);
}

// A writer publishes cursors whose wrap and count agree (count = wrap * 3, flags = wrap's low
// byte); a reader must never see a half whose fields disagree, and never a consumer half
// newer than the producer half it reads after it.
TEST(CdcSmcd, HalvesAreNeverTorn)
{
    alignas(8) std::byte head[kSmcdHeadSize] = {};
    std::atomic<bool> done{false};
    std::thread writer([&] {
        for (std::uint32_t i = 0; i < 200000; ++i) {
            CdcMessage m;
            const auto w = static_cast<std::uint16_t>(i);
            m.producer = {w, i * 3};
            m.consumer = {w, i * 3};
            m.producerFlags = producerFlagsFrom(static_cast<std::uint8_t>(w & 0xf8));
            publishSmcd(head, m);
        }
        done = true;
    });
    std::uint64_t reads = 0, bad = 0;
    while (!done.load() || reads < 1000) {
        const CdcMessage m = readSmcd(head);
        ++reads;
        if (m.producer.count % 3 != 0 ||
            static_cast<std::uint16_t>(m.producer.count / 3) != m.producer.wrap)
            ++bad;
        if (m.consumer.count % 3 != 0 ||
            static_cast<std::uint16_t>(m.consumer.count / 3) != m.consumer.wrap ||
            toByte(m.producerFlags) != (m.consumer.wrap & 0xf8))
            ++bad;
        if (m.consumer.count > m.producer.count) // consumer half read first: never newer
            ++bad;
    }
    writer.join();
    EXPECT_EQ(bad, 0u) << "of " << reads << " reads";
}

// ---- ring copies

TEST(CdcRing, PiecesSplitAtTheEnd)
{
    Bytes ring(10);
    auto p = ringPieces(std::span<std::byte>(ring), 7, 5);
    EXPECT_EQ(p[0].data(), ring.data() + 7);
    EXPECT_EQ(p[0].size(), 3u);
    EXPECT_EQ(p[1].data(), ring.data());
    EXPECT_EQ(p[1].size(), 2u);
    p = ringPieces(std::span<std::byte>(ring), 2, 5);
    EXPECT_EQ(p[0].size(), 5u);
    EXPECT_TRUE(p[1].empty());
    p = ringPieces(std::span<std::byte>(ring), 0, 10);
    EXPECT_EQ(p[0].size(), 10u);
    EXPECT_TRUE(p[1].empty());
    p = ringPieces(std::span<std::byte>(ring), 3, 10); // the whole ring from 3
    EXPECT_EQ(p[0].size() + p[1].size(), 10u);
    p = ringPieces(std::span<std::byte>(ring), 9, 0);
    EXPECT_TRUE(p[0].empty() && p[1].empty());
}

TEST(CdcRing, CopyInAndOutAcrossTheWrap)
{
    Bytes ring(16, std::byte{0});
    Bytes in(11);
    for (std::size_t i = 0; i < in.size(); ++i)
        in[i] = std::byte(i + 1);
    EXPECT_EQ(copyToRing(ring, 10, in), 11u);
    for (std::size_t i = 0; i < 6; ++i)
        EXPECT_EQ(ring[10 + i], std::byte(i + 1));
    for (std::size_t i = 0; i < 5; ++i)
        EXPECT_EQ(ring[i], std::byte(i + 7));
    EXPECT_EQ(ring[5], std::byte{0});
    Bytes out(11);
    EXPECT_EQ(copyFromRing(ring, 10, out), 11u);
    EXPECT_EQ(out, in);
}

} // namespace
} // namespace smc::cdc
