// SPDX-License-Identifier: MIT
// libFuzzer target: decodeSmcr and sequences of peer CDCs into a CdcStream. Whatever the peer
// sends, readable() stays within our ring and sendSpace() within the peer's, a refused
// message changes nothing, and what decodes re-encodes to the same fields.
//
// Input: byte 0 picks the two ring sizes (kSizes[b % 8] ours, kSizes[b / 8 % 8] the peer's);
// then steps, each an op byte and its operands (a step cut short by the end of the input ends
// the run): op % 6 ==
//   0: raw SMC-R CDC, the next 44 bytes, through decodeSmcr into onPeerCdc
//   1: produce(u16)   2: consume(u16) (both clamped to what is allowed when op & 0x80)
//   3: nextCdc(u16 pending): the message is ours to check and re-decode
//   4: an honest peer CDC: producer advanced by u16 within the space we advertised,
//      consumer advanced by u16 within what we produced
//   5: raw SMC-D head halves, the next 16 bytes, published and read back into onPeerCdc
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "smc/cdc/cdc_stream.h"

namespace
{

using namespace smc::cdc;

constexpr std::size_t kSizes[8] = {1,           7, 100, 1000, 16384, 65536, std::size_t(1) << 20,
                                   kMaxRingSize};

// A broken invariant: its line on stderr, then abort (libFuzzer keeps the input).
void fail(int line)
{
    std::fprintf(stderr, "INVARIANT cdc_fuzz.cpp:%d\n", line);
    std::abort();
}
#define CDC_FUZZ_CHECK(ok)                                                                         \
    do {                                                                                           \
        if (!(ok))                                                                                 \
            fail(__LINE__);                                                                        \
    } while (0)

struct Input {
    const std::uint8_t* p;
    std::size_t left;
    bool take(std::size_t n, const std::uint8_t*& out)
    {
        if (left < n)
            return false;
        out = p;
        p += n;
        left -= n;
        return true;
    }
    bool u16(std::size_t& v)
    {
        const std::uint8_t* b;
        if (!take(2, b))
            return false;
        v = std::size_t(b[0]) << 8 | b[1];
        return true;
    }
};

struct Snapshot {
    std::size_t sendSpace, readable, toConfirm;
    Cursor producer, consumer, peerProducer, peerConsumer, advertised;
    ConnFlags peerConn;
    ProducerFlags peerFlags;
    bool operator==(const Snapshot&) const = default;
};

Snapshot snap(const CdcStream& s)
{
    return {s.sendSpace(),     s.readable(),         s.toConfirm(),    s.producer(),
            s.consumer(),      s.peerProducer(),     s.peerConsumer(), s.advertised(),
            s.peerConnFlags(), s.peerProducerFlags()};
}

void invariants(const CdcStream& s)
{
    CDC_FUZZ_CHECK(s.readable() <= s.ringSize());
    CDC_FUZZ_CHECK(s.sendSpace() <= s.peerRingSize());
    CDC_FUZZ_CHECK(s.toConfirm() + s.readable() <= s.ringSize());
    CDC_FUZZ_CHECK(s.consumer().count < s.ringSize() && s.producer().count < s.peerRingSize());
}

void deliver(CdcStream& s, const CdcMessage& m)
{
    const Snapshot before = snap(s);
    const smc::Result<void> r = s.onPeerCdc(m);
    if (!r) {
        CDC_FUZZ_CHECK(snap(s) == before);
        CDC_FUZZ_CHECK(r.error() == std::errc::protocol_error);
    } else if (!m.producerFlags.failoverValidation) {
        // Accepted cursors only move forward, at most one ring.
        CDC_FUZZ_CHECK(
            validateCursor(s.ringSize(), before.peerProducer, s.peerProducer()).has_value());
        CDC_FUZZ_CHECK(
            validateCursor(s.peerRingSize(), before.peerConsumer, s.peerConsumer()).has_value());
        CDC_FUZZ_CHECK(s.readable() >= before.readable && s.sendSpace() >= before.sendSpace);
    }
    invariants(s);
}

// The bytes decodeSmcr reads must come back from encodeSmcr (reserved bits and bytes 0).
void roundTrip(const std::uint8_t* raw, const CdcMessage& m)
{
    const auto wire = encodeSmcr(m);
    const smc::Result<CdcMessage> again = decodeSmcr(wire);
    CDC_FUZZ_CHECK(again.has_value() && *again == m);
    static constexpr std::size_t kFields[] = {0,  1,  2,  3,  4,  5,  6,  7,  10, 11,
                                              12, 13, 14, 15, 18, 19, 20, 21, 22, 23};
    for (const std::size_t i : kFields)
        CDC_FUZZ_CHECK(std::to_integer<std::uint8_t>(wire[i]) == raw[i]);
    CDC_FUZZ_CHECK(std::to_integer<std::uint8_t>(wire[24]) == (raw[24] & 0xf8));
    CDC_FUZZ_CHECK(std::to_integer<std::uint8_t>(wire[25]) == (raw[25] & 0xe0));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0)
        return 0;
    // The decoder alone, on the whole input.
    const std::span<const std::byte> all(reinterpret_cast<const std::byte*>(data), size);
    if (const smc::Result<CdcMessage> m = decodeSmcr(all); m && size >= kSmcrCdcSize)
        roundTrip(data, *m);

    CdcStream s =
        std::move(CdcStream::create(kSizes[data[0] % 8], kSizes[data[0] / 8 % 8])).value();
    Input in{data + 1, size - 1};
    alignas(8) std::byte head[kSmcdHeadSize] = {};
    const std::uint8_t* op;
    while (in.take(1, op)) {
        const bool clamp = (*op & 0x80) != 0;
        std::size_t n = 0, k = 0;
        const std::uint8_t* b;
        switch (*op % 6) {
        case 0: {
            if (!in.take(kSmcrCdcSize, b))
                return 0;
            const smc::Result<CdcMessage> m =
                decodeSmcr({reinterpret_cast<const std::byte*>(b), kSmcrCdcSize});
            if (m) {
                roundTrip(b, *m);
                deliver(s, *m);
            }
            break;
        }
        case 1:
            if (!in.u16(n))
                return 0;
            if (clamp)
                n = std::min(n, s.sendSpace());
            k = s.sendSpace();
            CDC_FUZZ_CHECK(s.produce(n).has_value() == (n <= k));
            CDC_FUZZ_CHECK(s.sendSpace() == (n <= k ? k - n : k));
            break;
        case 2:
            if (!in.u16(n))
                return 0;
            if (clamp)
                n = std::min(n, s.readable());
            k = s.readable();
            CDC_FUZZ_CHECK(s.consume(n).has_value() == (n <= k));
            CDC_FUZZ_CHECK(s.readable() == (n <= k ? k - n : k));
            break;
        case 3: {
            if (!in.u16(n))
                return 0;
            const Cursor producer = s.producer(), consumer = s.consumer();
            const CdcMessage m = s.nextCdc(n);
            CDC_FUZZ_CHECK(m.producer == producer && m.consumer == consumer);
            CDC_FUZZ_CHECK(s.advertised() == consumer && s.toConfirm() == 0);
            CDC_FUZZ_CHECK(m.connFlags == s.sentConnFlags());
            const auto wire = encodeSmcr(m);
            const smc::Result<CdcMessage> again = decodeSmcr(wire);
            CDC_FUZZ_CHECK(again.has_value() && *again == m);
            break;
        }
        case 4: {
            if (!in.u16(n) || !in.u16(k))
                return 0;
            // Room the peer knows of: our ring beyond its data past the advertised cursor.
            const std::size_t room =
                s.ringSize() - diffLarge(s.ringSize(), s.advertised(), s.peerProducer());
            const std::size_t unconsumed = s.peerRingSize() - s.sendSpace();
            CdcMessage m;
            m.producer = advance(s.peerProducer(), std::min(n, room), s.ringSize());
            m.consumer = advance(s.peerConsumer(), std::min(k, unconsumed), s.peerRingSize());
            m.producerFlags = producerFlagsFrom(*op & 0xf0);
            m.producerFlags.failoverValidation = false;
            CDC_FUZZ_CHECK(s.onPeerCdc(m).has_value()); // an honest peer is never refused
            invariants(s);
            break;
        }
        case 5: {
            if (!in.take(16, b))
                return 0;
            std::memcpy(head + kSmcdProducerOffset, b, 16);
            const CdcMessage raw = readSmcd(head);
            publishSmcd(head, raw);
            const CdcMessage m = readSmcd(head);
            CDC_FUZZ_CHECK(m == raw);
            deliver(s, m);
            break;
        }
        }
        invariants(s);
    }
    return 0;
}
