// SPDX-License-Identifier: MIT
// Ring copy: n bytes into or out of a ring at an offset, in at most two pieces split at its end.
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>

namespace smc::cdc
{

// The bytes [offset, offset + n) of `ring` taken modulo its size: pieces[0] runs from
// offset to at most the ring's end, pieces[1] from 0 (empty unless the range wraps). The
// views are for copies and for zero-copy use (send into the peer's ring, receive from ours).
// Preconditions: offset < ring.size() and n <= ring.size() (a cursor count and a length a
// CdcStream has checked). A violation is a caller bug: asserted, and in release builds
// clamped, so a view never leaves the ring. Never blocks.
template <typename Byte>
requires std::is_same_v<std::remove_const_t<Byte>, std::byte> std::array < std::span<Byte>,
2 > ringPieces(std::span<Byte> ring, std::size_t offset, std::size_t n) noexcept
{
    assert(ring.empty() ? n == 0 : offset < ring.size());
    assert(n <= ring.size());
    if (ring.empty())
        return {};
    offset = std::min(offset, ring.size() - 1);
    n = std::min(n, ring.size());
    const std::size_t first = std::min(n, ring.size() - offset);
    return {ring.subspan(offset, first), ring.first(n - first)};
}

// Copies `src` into `ring` at `offset`, wrapping at the end; returns the bytes copied
// (src.size(), or less when the preconditions of ringPieces are broken). Never blocks.
inline std::size_t copyToRing(std::span<std::byte> ring, std::size_t offset,
                              std::span<const std::byte> src) noexcept
{
    const auto pieces = ringPieces(ring, offset, src.size());
    std::size_t done = 0;
    for (const std::span<std::byte> p : pieces) {
        if (!p.empty())
            std::memcpy(p.data(), src.data() + done, p.size());
        done += p.size();
    }
    return done;
}

// Copies dst.size() bytes out of `ring` from `offset`, wrapping at the end; returns the
// bytes copied (as copyToRing). Never blocks.
inline std::size_t copyFromRing(std::span<const std::byte> ring, std::size_t offset,
                                std::span<std::byte> dst) noexcept
{
    const auto pieces = ringPieces(ring, offset, dst.size());
    std::size_t done = 0;
    for (const std::span<const std::byte> p : pieces) {
        if (!p.empty())
            std::memcpy(dst.data() + done, p.data(), p.size());
        done += p.size();
    }
    return done;
}

} // namespace smc::cdc
