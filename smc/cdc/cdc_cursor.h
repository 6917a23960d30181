// SPDX-License-Identifier: MIT
// CDC cursors (wrap, count) into a ring: advance, distance, the no-rewind rule, validation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/result.h"
#include "smc/cdc/cdc_errors.h"

namespace smc::cdc
{

// The largest ring a cursor may run over: counts are 32-bit on the wire, and every
// distance below is then exact in 64-bit arithmetic. Linux's largest RMB is 512 MiB.
inline constexpr std::size_t kMaxRingSize = std::size_t(1) << 31;

// A position in a ring of ringSize bytes: `count` in [0, ringSize) is the byte offset,
// `wrap` (mod 2^16) counts how often count went past the end (connection notes §2.1).
struct Cursor {
    std::uint16_t wrap = 0;
    std::uint32_t count = 0;

    friend bool operator==(const Cursor&, const Cursor&) = default;
};

// `c` moved n bytes on (any n, several wraps included). Precondition: 0 < ringSize <=
// kMaxRingSize and c.count < ringSize.
constexpr Cursor advance(Cursor c, std::size_t n, std::size_t ringSize) noexcept
{
    const std::uint64_t total = std::uint64_t(c.count) + n;
    return {static_cast<std::uint16_t>(c.wrap + total / ringSize),
            static_cast<std::uint32_t>(total % ringSize)};
}

// Bytes from `older` to `newer`, assuming they are at most one wrap apart (Linux
// smc_curs_diff): with different wraps ringSize - older.count + newer.count, else
// newer.count - older.count; never below 0.
constexpr std::size_t diff(std::size_t ringSize, Cursor older, Cursor newer) noexcept
{
    const std::int64_t d = older.wrap != newer.wrap
                               ? std::int64_t(ringSize) - older.count + newer.count
                               : std::int64_t(newer.count) - older.count;
    return d > 0 ? static_cast<std::size_t>(d) : 0;
}

// Bytes from `older` to `newer` when they may be several wraps apart (wrap 0xFFFF -> 0
// included), capped at ringSize (Linux smc_curs_diff_large); same wrap: as diff().
constexpr std::size_t diffLarge(std::size_t ringSize, Cursor older, Cursor newer) noexcept
{
    const std::uint16_t wraps = static_cast<std::uint16_t>(newer.wrap - older.wrap);
    if (wraps == 0)
        return diff(ringSize, older, newer);
    const std::int64_t d = std::int64_t(ringSize) - older.count + newer.count +
                           std::int64_t(wraps - 1) * std::int64_t(ringSize);
    return d < std::int64_t(ringSize) ? static_cast<std::size_t>(d > 0 ? d : 0) : ringSize;
}

// Linux's receive rule for a local copy of a peer cursor (smc_cdc_cursor_to_host): the
// received cursor is older, and must not replace `current`, when current.wrap >
// received.wrap and received.wrap != 0 (0 is taken as 0xFFFF -> 0), or the wraps are
// equal and current.count > received.count. isNewer: strictly ahead by that rule.
constexpr bool isOlder(Cursor current, Cursor received) noexcept
{
    if (current.wrap > received.wrap && received.wrap != 0)
        return true;
    return current.wrap == received.wrap && current.count > received.count;
}
constexpr bool isNewer(Cursor current, Cursor received) noexcept
{
    return received != current && !isOlder(current, received);
}
// The local copy after `received`: never moved backwards.
constexpr Cursor accept(Cursor current, Cursor received) noexcept
{
    return isOlder(current, received) ? current : received;
}

// The checked form for a cursor from an untrusted peer: how many bytes `received` is ahead
// of `reference` (a cursor the peer may not fall behind), in [0, ringSize]. Unlike the
// rules above this never guesses: the two must be at most one wrap apart.
// Errors (CdcErrc): CursorOutOfRange (received.count >= ringSize), CursorBackwards
// (received is behind reference), CursorTooFar (more than ringSize ahead).
// Precondition: 0 < ringSize <= kMaxRingSize, reference.count < ringSize. Never blocks.
Result<std::size_t> validateCursor(std::size_t ringSize, Cursor reference,
                                   Cursor received) noexcept;

} // namespace smc::cdc
