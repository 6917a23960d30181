// SPDX-License-Identifier: MIT
// CDC messages: fields, the SMC-R wire codec and the SMC-D DMB head, with atomic publication.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "base/result.h"
#include "smc/cdc/cdc_cursor.h"
#include "smc/cdc/cdc_errors.h"

namespace smc::cdc
{

inline constexpr std::uint8_t kCdcType = 0xfe; // byte 0 of either form
// SMC-R (connection notes §2.1): 44 bytes on the RC QP, every multi-byte field big-endian.
inline constexpr std::size_t kSmcrCdcSize = 44;
// Linux reads a received SMC-R CDC only up to its connection flags (byte 25): a receive
// completion of at least this many bytes is a CDC; the reserved rest is ignored.
inline constexpr std::size_t kSmcrCdcMinSize = 26;
// SMC-D (§2.2): the first 32 bytes of the DMB, written by the peer; the data ring follows.
inline constexpr std::size_t kSmcdHeadSize = 32;
inline constexpr std::size_t kSmcdDataOffset = 32; // Linux rx_off for SMC-D
inline constexpr std::size_t kSmcdHeadAlignment = 8;
inline constexpr std::size_t kSmcdProducerOffset = 8;  // wrap, count, 2 bytes sent 0
inline constexpr std::size_t kSmcdConsumerOffset = 16; // wrap, count, producer/conn flags
// Bytes 24..31 (reserved in Linux) belong to the socket layer's doorbell word: nothing
// here reads or writes them.
inline constexpr std::size_t kSmcdDoorbellOffset = 24;

// Producer flags (byte 24 of SMC-R, byte 22 of SMC-D): bit values as on the wire.
struct ProducerFlags {
    bool writeBlocked = false;       // 0x80: the sender has more than the ring has room for
    bool urgDataPending = false;     // 0x40: urgent data announced
    bool urgDataPresent = false;     // 0x20: the urgent byte has been written
    bool consCursUpdReq = false;     // 0x10: please send a consumer cursor update
    bool failoverValidation = false; // 0x08: SMC-R failover validation only (§2.7)

    friend bool operator==(const ProducerFlags&, const ProducerFlags&) = default;
};

// Connection state flags (byte 25 of SMC-R, byte 23 of SMC-D); sticky once sent.
struct ConnFlags {
    bool peerDoneWriting = false; // 0x80: shutdown(SHUT_WR)
    bool peerConnClosed = false;  // 0x40: closed, nothing unread
    bool peerConnAbort = false;   // 0x20: aborted (or closed with unread data)

    bool any() const noexcept { return peerDoneWriting || peerConnClosed || peerConnAbort; }
    ConnFlags& operator|=(const ConnFlags& o) noexcept
    {
        peerDoneWriting |= o.peerDoneWriting;
        peerConnClosed |= o.peerConnClosed;
        peerConnAbort |= o.peerConnAbort;
        return *this;
    }
    friend bool operator==(const ConnFlags&, const ConnFlags&) = default;
};

// Flag bytes; the reserved bits (0x07, 0x1f) are 0 on send and ignored on receive.
std::uint8_t toByte(ProducerFlags f) noexcept;
std::uint8_t toByte(ConnFlags f) noexcept;
ProducerFlags producerFlagsFrom(std::uint8_t byte) noexcept;
ConnFlags connFlagsFrom(std::uint8_t byte) noexcept;

// One CDC message in host form. `producer`: how far the sender has written into the
// receiver's ring; `consumer`: how far the sender has read its own ring. `seq` and `token`
// (the receiving connection's alert token) exist only in the SMC-R form.
struct CdcMessage {
    std::uint16_t seq = 0;
    std::uint32_t token = 0;
    Cursor producer;
    Cursor consumer;
    ProducerFlags producerFlags;
    ConnFlags connFlags;

    friend bool operator==(const CdcMessage&, const CdcMessage&) = default;
};

// Linux's duplicate rule for SMC-R (§2.5): a CDC whose sequence number is before the last
// one processed, (s16)(seq - last) < 0, is dropped; an equal one is processed again.
constexpr bool isStaleSeq(std::uint16_t last, std::uint16_t seq) noexcept
{
    return static_cast<std::int16_t>(static_cast<std::uint16_t>(seq - last)) < 0;
}

// The 44 SMC-R bytes: type, length 44, the fields big-endian, reserved bytes 0.
// Never fails, never blocks.
std::array<std::byte, kSmcrCdcSize> encodeSmcr(const CdcMessage& m) noexcept;

// Reads an SMC-R CDC from a receive completion of bytes.size() bytes (a receive slot may be
// longer than 44: only the first 44 are looked at). Reserved bits and bytes are ignored,
// as Linux does. Cursors are not checked here: CdcStream::onPeerCdc does that.
// Errors (CdcErrc): Truncated (fewer than kSmcrCdcMinSize bytes), BadType, BadLength.
// Never blocks.
Result<CdcMessage> decodeSmcr(std::span<const std::byte> bytes) noexcept;

// The SMC-D head, for a peer in another process: this project fixes its byte order as
// little-endian (Linux uses the CPU's, as ISM is s390-only; see docs/design.md "CDC").
// Each 8-byte half is one aligned 64-bit word: bytes 8..15 = producer wrap (LE16 at 8),
// count (LE32 at 10), 0, 0; bytes 16..23 = consumer wrap (LE16 at 16), count (LE32 at 18),
// producer flags (22), connection flags (23).
//
// publishSmcd writes the type byte (0xFE at 0), then the producer half, then the consumer
// half, each as one 8-byte atomic store with release order: a reader that sees a consumer
// half (and its flags) also sees the producer half published with or before it, and every
// data byte written to the ring before the publication. Bytes 1..7 and 24..31 (the
// doorbell) are not touched; seq and token are not part of the SMC-D form.
// Precondition: `head` is 8-aligned and has kSmcdHeadSize bytes. Never blocks.
void publishSmcd(std::byte* head, const CdcMessage& m) noexcept;

// Reads a head published by publishSmcd: the consumer half, then the producer half, each
// one 8-byte atomic load with acquire order. Halves may come from different publications
// (the producer one never older than the consumer one); a half is never torn.
// seq and token come back 0. Precondition as for publishSmcd. Never blocks.
CdcMessage readSmcd(const std::byte* head) noexcept;

} // namespace smc::cdc
