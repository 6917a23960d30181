// SPDX-License-Identifier: MIT
// CdcStream: one connection's cursors, window and flags; pure state, no locks, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/result.h"
#include "smc/cdc/cdc_cursor.h"
#include "smc/cdc/cdc_errors.h"
#include "smc/cdc/cdc_messages.h"

namespace smc::cdc
{

// The lower bound of the window update limit: Linux's SOCK_MIN_SNDBUF / 2 (§2.6).
inline constexpr std::size_t kWindowUpdateFloor = 2304;

// Linux's rmbe_update_limit for a ring of ringSize bytes: max(ringSize / 10, 2304), and
// (ours) at most ringSize / 2, so a ring below 4608 bytes, which Linux never has (its
// smallest is 16 KiB), still gets updates before it is full.
constexpr std::size_t windowUpdateLimit(std::size_t ringSize) noexcept
{
    const std::size_t limit =
        ringSize / 10 > kWindowUpdateFloor ? ringSize / 10 : kWindowUpdateFloor;
    return limit < ringSize / 2 ? limit : ringSize / 2;
}

// The CDC side of one connection (connection notes §2, §3): where we have written into the
// peer's ring, where the peer has read it, what it has written into ours (our RMB), how far
// we have read that, and what we last told the peer. The caller copies the bytes (cdc_ring.h)
// and moves the messages; this class only keeps the books. No locks inside: the caller
// serialises every call on one stream. Nothing here blocks.
//
// Every cursor from the peer is checked before it is used (onPeerCdc), so readable() never
// exceeds our ring and sendSpace() never exceeds the peer's, whatever the peer sends.
class CdcStream
{
public:
    // ringSize: our RMB's data ring (what the peer writes into); peerRingSize: the peer's
    // (from CLC); peerToken: the peer connection's alert token (SMC-R; 0 for SMC-D).
    // Errors (CdcErrc): BadRingSize (either size 0 or above kMaxRingSize).
    static Result<CdcStream> create(std::size_t ringSize, std::size_t peerRingSize,
                                    std::uint32_t peerToken = 0) noexcept;

    std::size_t ringSize() const noexcept { return ringSize_; }
    std::size_t peerRingSize() const noexcept { return peerRingSize_; }

    // --- sending into the peer's ring
    // Free bytes in the peer's ring as far as we know: its size minus what we produced
    // and it has not yet consumed. In [0, peerRingSize()].
    std::size_t sendSpace() const noexcept;
    // Where the next byte goes in the peer's ring (the producer cursor's count).
    Cursor producer() const noexcept { return producer_; }
    // After the caller wrote n bytes at producer().count (wrapping). No message is built
    // here: nextCdc() carries the new producer.
    // Errors (CdcErrc): ExceedsSpace (n > sendSpace(); nothing changes).
    Result<void> produce(std::size_t n) noexcept;

    // --- receiving from our ring
    // Bytes the peer has written into our ring that we have not consumed, in [0, ringSize()].
    std::size_t readable() const noexcept { return bytesToRcv_; }
    // Where the next readable byte is in our ring (our consumer cursor's count).
    Cursor consumer() const noexcept { return consumer_; }
    // After the caller read n bytes at consumer().count (wrapping).
    // Errors (CdcErrc): ExceedsReadable (n > readable(); nothing changes).
    Result<void> consume(std::size_t n) noexcept;

    // A CDC from the peer (decoded SMC-R, or read from our DMB head). Its producer cursor
    // must lie in our ring, not behind the last one, and at most one ring ahead of the
    // consumer cursor we last advertised; its consumer cursor must lie in the peer's ring,
    // not behind the last one, and not beyond our producer. Then readable() grows by the new
    // data, sendSpace() by what the peer consumed, and the flags are taken (connection flags
    // sticky). A failover validation message (§2.7) changes nothing (its sequence number
    // check is the link's); SMC-R sequence numbers are the caller's (isStaleSeq).
    // Errors (CdcErrc): CursorOutOfRange, CursorBackwards, CursorTooFar, CursorBeyondProducer
    // -- and then nothing has changed.
    Result<void> onPeerCdc(const CdcMessage& m) noexcept;

    // Linux's window update rule (§2.6): the peer asked (cons_curs_upd_req), or we consumed
    // more than windowUpdateLimit(ringSize()) since the last advertised consumer cursor and
    // (the peer sees at most half our ring free, or it said it is write blocked).
    bool wantConsumerUpdate() const noexcept;
    // Bytes consumed since the consumer cursor last advertised by nextCdc().
    std::size_t toConfirm() const noexcept;

    // The CDC to send now: the next sequence number (the first is 1), the peer's token, our
    // producer and consumer cursors, the sticky connection flags, write_blocked when the
    // caller has `pending` bytes it could not produce (pending > sendSpace()) or the peer's
    // ring is full. Marks the consumer advertised, answers the peer's update request, and
    // forgets its write_blocked once nothing is left to read (as Linux). Urgent flags are
    // the caller's to add.
    CdcMessage nextCdc(std::size_t pending = 0) noexcept;

    // --- flags
    // Sets connection flags for every later CDC (sticky; the close machine says which).
    void addConnFlags(ConnFlags f) noexcept { sent_ |= f; }
    ConnFlags sentConnFlags() const noexcept { return sent_; }
    // Every connection flag the peer has sent (sticky), and its latest producer flags.
    ConnFlags peerConnFlags() const noexcept { return received_; }
    ProducerFlags peerProducerFlags() const noexcept { return peerFlags_; }
    // The last consumer cursor received: how far the peer has read its ring.
    Cursor peerConsumer() const noexcept { return peerConsumer_; }
    // The last producer cursor received: the end of the peer's data in our ring.
    Cursor peerProducer() const noexcept { return peerProducer_; }
    // The consumer cursor last sent in nextCdc().
    Cursor advertised() const noexcept { return advertised_; }

private:
    CdcStream(std::size_t ringSize, std::size_t peerRingSize, std::uint32_t peerToken) noexcept
        : ringSize_(ringSize), peerRingSize_(peerRingSize), peerToken_(peerToken)
    {
    }

    std::size_t ringSize_;
    std::size_t peerRingSize_;
    std::uint32_t peerToken_;
    std::uint16_t seq_ = 0;
    Cursor producer_;     // into the peer's ring
    Cursor peerConsumer_; // of the peer's ring, latest received
    Cursor peerProducer_; // into our ring, latest received
    Cursor consumer_;     // of our ring
    Cursor advertised_;   // our consumer cursor as last sent
    std::size_t bytesToRcv_ = 0;
    ConnFlags sent_;
    ConnFlags received_;
    ProducerFlags peerFlags_;
};

} // namespace smc::cdc
