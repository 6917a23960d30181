// SPDX-License-Identifier: MIT
// Big-endian fields in byte buffers: how the CLC, LLC and CDC wire formats are read and written.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace smc
{

// The `n`-byte (1..8) big-endian integer at `offset`. The caller checks bounds; an assert
// catches a codec that did not.
constexpr std::uint64_t loadBe(std::span<const std::byte> b, std::size_t offset, int n) noexcept
{
    assert(offset + static_cast<std::size_t>(n) <= b.size());
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i)
        v = v << 8 | std::to_integer<std::uint8_t>(b[offset + static_cast<std::size_t>(i)]);
    return v;
}

// Writes the low `n` (1..8) bytes of `v` big-endian at `offset`.
constexpr void storeBe(std::span<std::byte> b, std::size_t offset, std::uint64_t v, int n) noexcept
{
    assert(offset + static_cast<std::size_t>(n) <= b.size());
    for (int i = n - 1; i >= 0; --i, v >>= 8)
        b[offset + static_cast<std::size_t>(i)] = std::byte(v & 0xff);
}

// Field reads at offsets into one message.
struct BeReader {
    std::span<const std::byte> b;

    std::uint8_t u8(std::size_t o) const
    {
        assert(o < b.size());
        return std::to_integer<std::uint8_t>(b[o]);
    }
    std::uint64_t be(std::size_t o, int n) const { return loadBe(b, o, n); }
    std::uint16_t be16(std::size_t o) const { return static_cast<std::uint16_t>(be(o, 2)); }
    std::uint32_t be32(std::size_t o) const { return static_cast<std::uint32_t>(be(o, 4)); }
    std::uint64_t be64(std::size_t o) const { return be(o, 8); }
    template <std::size_t N> std::array<std::uint8_t, N> bytes(std::size_t o) const
    {
        assert(o + N <= b.size());
        std::array<std::uint8_t, N> a{};
        std::memcpy(a.data(), b.data() + o, N);
        return a;
    }
    // In host order: Linux writes a few LLC fields unswapped.
    std::uint16_t host16(std::size_t o) const
    {
        assert(o + 2 <= b.size());
        std::uint16_t v;
        std::memcpy(&v, b.data() + o, 2);
        return v;
    }
};

// Field writes into a buffer sized (and zeroed) up front, so reserved bytes stay 0.
struct BeWriter {
    std::span<std::byte> b;

    void u8(std::size_t o, std::uint8_t v)
    {
        assert(o < b.size());
        b[o] = std::byte{v};
    }
    void be(std::size_t o, std::uint64_t v, int n) { storeBe(b, o, v, n); }
    void be64(std::size_t o, std::uint64_t v) { storeBe(b, o, v, 8); }
    template <std::size_t N> void bytes(std::size_t o, const std::array<std::uint8_t, N>& a)
    {
        assert(o + N <= b.size());
        std::memcpy(b.data() + o, a.data(), N);
    }
    void host16(std::size_t o, std::uint16_t v)
    {
        assert(o + 2 <= b.size());
        std::memcpy(b.data() + o, &v, 2);
    }
};

} // namespace smc
