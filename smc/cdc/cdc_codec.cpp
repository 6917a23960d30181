// SPDX-License-Identifier: MIT
// CDC codec: the SMC-R 44-byte big-endian form and the SMC-D little-endian DMB head.
#include <atomic>
#include <bit>
#include <cassert>
#include <cstring>

#include "base/bytes.h"
#include "smc/cdc/cdc_messages.h"

namespace smc::cdc
{
namespace
{

// SMC-R field offsets (connection notes §2.1).
constexpr std::size_t kTypeOffset = 0;
constexpr std::size_t kLengthOffset = 1;
constexpr std::size_t kSeqOffset = 2;
constexpr std::size_t kTokenOffset = 4;
constexpr std::size_t kProducerWrapOffset = 10;
constexpr std::size_t kProducerCountOffset = 12;
constexpr std::size_t kConsumerWrapOffset = 18;
constexpr std::size_t kConsumerCountOffset = 20;
constexpr std::size_t kProducerFlagsOffset = 24;
constexpr std::size_t kConnFlagsOffset = 25;

constexpr std::uint8_t kWriteBlocked = 0x80;
constexpr std::uint8_t kUrgDataPending = 0x40;
constexpr std::uint8_t kUrgDataPresent = 0x20;
constexpr std::uint8_t kConsCursUpdReq = 0x10;
constexpr std::uint8_t kFailoverValidation = 0x08;
constexpr std::uint8_t kPeerDoneWriting = 0x80;
constexpr std::uint8_t kPeerConnClosed = 0x40;
constexpr std::uint8_t kPeerConnAbort = 0x20;

// One 64-bit word of the SMC-D head, its bytes in little-endian order on every host.
std::uint64_t toLittle(std::uint64_t v) noexcept
{
    if constexpr (std::endian::native == std::endian::little)
        return v;
    std::uint64_t r = 0;
    for (int i = 0; i < 8; ++i, v >>= 8)
        r = r << 8 | (v & 0xff);
    return r;
}

std::uint64_t packHalf(Cursor c, std::uint8_t flags, std::uint8_t state) noexcept
{
    return toLittle(std::uint64_t(c.wrap) | std::uint64_t(c.count) << 16 |
                    std::uint64_t(flags) << 48 | std::uint64_t(state) << 56);
}

Cursor unpackCursor(std::uint64_t word) noexcept
{
    const std::uint64_t v = toLittle(word);
    return {static_cast<std::uint16_t>(v), static_cast<std::uint32_t>(v >> 16)};
}

std::atomic_ref<std::uint64_t> word(const std::byte* head, std::size_t offset) noexcept
{
    // The DMB is writable shared memory; atomic_ref needs a non-const object.
    auto* p = reinterpret_cast<std::uint64_t*>(const_cast<std::byte*>(head + offset));
    return std::atomic_ref<std::uint64_t>(*p);
}

} // namespace

std::uint8_t toByte(ProducerFlags f) noexcept
{
    return static_cast<std::uint8_t>(
        (f.writeBlocked ? kWriteBlocked : 0) | (f.urgDataPending ? kUrgDataPending : 0) |
        (f.urgDataPresent ? kUrgDataPresent : 0) | (f.consCursUpdReq ? kConsCursUpdReq : 0) |
        (f.failoverValidation ? kFailoverValidation : 0));
}

std::uint8_t toByte(ConnFlags f) noexcept
{
    return static_cast<std::uint8_t>((f.peerDoneWriting ? kPeerDoneWriting : 0) |
                                     (f.peerConnClosed ? kPeerConnClosed : 0) |
                                     (f.peerConnAbort ? kPeerConnAbort : 0));
}

ProducerFlags producerFlagsFrom(std::uint8_t b) noexcept
{
    return {(b & kWriteBlocked) != 0, (b & kUrgDataPending) != 0, (b & kUrgDataPresent) != 0,
            (b & kConsCursUpdReq) != 0, (b & kFailoverValidation) != 0};
}

ConnFlags connFlagsFrom(std::uint8_t b) noexcept
{
    return {(b & kPeerDoneWriting) != 0, (b & kPeerConnClosed) != 0, (b & kPeerConnAbort) != 0};
}

std::array<std::byte, kSmcrCdcSize> encodeSmcr(const CdcMessage& m) noexcept
{
    std::array<std::byte, kSmcrCdcSize> out{};
    BeWriter w{out};
    w.u8(kTypeOffset, kCdcType);
    w.u8(kLengthOffset, kSmcrCdcSize);
    w.be(kSeqOffset, m.seq, 2);
    w.be(kTokenOffset, m.token, 4);
    w.be(kProducerWrapOffset, m.producer.wrap, 2);
    w.be(kProducerCountOffset, m.producer.count, 4);
    w.be(kConsumerWrapOffset, m.consumer.wrap, 2);
    w.be(kConsumerCountOffset, m.consumer.count, 4);
    w.u8(kProducerFlagsOffset, toByte(m.producerFlags));
    w.u8(kConnFlagsOffset, toByte(m.connFlags));
    return out;
}

Result<CdcMessage> decodeSmcr(std::span<const std::byte> bytes) noexcept
{
    if (bytes.size() < kSmcrCdcMinSize)
        return CdcErrc::Truncated;
    if (std::to_integer<std::uint8_t>(bytes[kTypeOffset]) != kCdcType)
        return CdcErrc::BadType;
    if (std::to_integer<std::uint8_t>(bytes[kLengthOffset]) != kSmcrCdcSize)
        return CdcErrc::BadLength;
    const BeReader r{bytes};
    CdcMessage m;
    m.seq = r.be16(kSeqOffset);
    m.token = r.be32(kTokenOffset);
    m.producer = {r.be16(kProducerWrapOffset), r.be32(kProducerCountOffset)};
    m.consumer = {r.be16(kConsumerWrapOffset), r.be32(kConsumerCountOffset)};
    m.producerFlags = producerFlagsFrom(r.u8(kProducerFlagsOffset));
    m.connFlags = connFlagsFrom(r.u8(kConnFlagsOffset));
    return m;
}

void publishSmcd(std::byte* head, const CdcMessage& m) noexcept
{
    assert(reinterpret_cast<std::uintptr_t>(head) % kSmcdHeadAlignment == 0);
    std::atomic_ref<std::uint8_t>(*reinterpret_cast<std::uint8_t*>(head))
        .store(kCdcType, std::memory_order_relaxed);
    word(head, kSmcdProducerOffset).store(packHalf(m.producer, 0, 0), std::memory_order_release);
    word(head, kSmcdConsumerOffset)
        .store(packHalf(m.consumer, toByte(m.producerFlags), toByte(m.connFlags)),
               std::memory_order_release);
}

CdcMessage readSmcd(const std::byte* head) noexcept
{
    assert(reinterpret_cast<std::uintptr_t>(head) % kSmcdHeadAlignment == 0);
    const std::uint64_t consumer = word(head, kSmcdConsumerOffset).load(std::memory_order_acquire);
    const std::uint64_t producer = word(head, kSmcdProducerOffset).load(std::memory_order_acquire);
    const std::uint64_t v = toLittle(consumer);
    CdcMessage m;
    m.producer = unpackCursor(producer);
    m.consumer = unpackCursor(consumer);
    m.producerFlags = producerFlagsFrom(static_cast<std::uint8_t>(v >> 48));
    m.connFlags = connFlagsFrom(static_cast<std::uint8_t>(v >> 56));
    return m;
}

} // namespace smc::cdc
