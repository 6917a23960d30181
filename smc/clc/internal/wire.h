// SPDX-License-Identifier: MIT
// Private to smc/clc: byte access and the offsets of Linux's CLC layouts.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "smc/clc/clc_messages.h"

namespace smc::clc::wire
{

// Header byte 7: version (7..4), typev2 (3..2), typev1 (1..0). In ACCEPT/CONFIRM bit 3 is
// first contact; in DECLINE it is out-of-sync.
inline constexpr std::uint8_t kFirstContactBit = 0x08;

// PROPOSAL: base, then the SMC-D area, the IP prefix area, the v2 and SMC-Dv2 extensions.
inline constexpr std::size_t kPropBaseSize = 40;
inline constexpr std::size_t kPropIpareaOffset = 38; // field: distance 40 -> IP area
inline constexpr std::size_t kSmcdAreaSize = 40;
inline constexpr std::size_t kSmcdAreaV2ExtOffset = 50; // field: distance 52 -> v2 ext
inline constexpr std::size_t kV2ExtBase = 52;           // where that distance starts
inline constexpr std::size_t kPrefixHeaderSize = 8;
inline constexpr std::size_t kIpv6PrefixSize = 17;
inline constexpr std::size_t kV2ExtFixedSize = 40;
inline constexpr std::size_t kV2ExtSmcdOffset = 6; // field: distance ext+8 -> SMC-Dv2 ext
inline constexpr std::size_t kSmcdV2ExtBase = 8;
inline constexpr std::size_t kSmcdV2ExtFixedSize = 48;
inline constexpr std::size_t kGidChidSize = 10;

// ACCEPT/CONFIRM.
inline constexpr std::size_t kSmcrEidOffset = 64;
inline constexpr std::size_t kSmcrFceOffset = 104;
inline constexpr std::size_t kSmcdChidOffset = 32;
inline constexpr std::size_t kSmcdFceOffset = 74;
inline constexpr std::size_t kFceSize = 52;
inline constexpr std::size_t kFceSizeSmcdRelease0 = 36;
inline constexpr std::size_t kGidListHeaderSize = 4;

// Big-endian reads. Callers check bounds first; the asserts catch a codec bug in tests.
struct Reader {
    std::span<const std::byte> b;

    std::uint8_t u8(std::size_t o) const
    {
        assert(o < b.size());
        return std::to_integer<std::uint8_t>(b[o]);
    }
    std::uint64_t be(std::size_t o, int n) const
    {
        assert(o + n <= b.size());
        std::uint64_t v = 0;
        for (int i = 0; i < n; ++i)
            v = v << 8 | std::to_integer<std::uint8_t>(b[o + i]);
        return v;
    }
    std::uint16_t be16(std::size_t o) const { return static_cast<std::uint16_t>(be(o, 2)); }
    std::uint32_t be32(std::size_t o) const { return static_cast<std::uint32_t>(be(o, 4)); }
    std::uint64_t be64(std::size_t o) const { return be(o, 8); }
    template <std::size_t N> std::array<std::uint8_t, N> bytes(std::size_t o) const
    {
        assert(o + N <= b.size());
        std::array<std::uint8_t, N> a{};
        for (std::size_t i = 0; i < N; ++i)
            a[i] = std::to_integer<std::uint8_t>(b[o + i]);
        return a;
    }
};

// Writes into a buffer sized (and zeroed) up front, so reserved bytes stay 0.
struct Writer {
    std::vector<std::byte>& b;

    void u8(std::size_t o, std::uint8_t v)
    {
        assert(o < b.size());
        b[o] = std::byte{v};
    }
    void be(std::size_t o, std::uint64_t v, int n)
    {
        assert(o + n <= b.size());
        for (int i = n - 1; i >= 0; --i, v >>= 8)
            b[o + i] = std::byte(v & 0xff);
    }
    template <std::size_t N> void bytes(std::size_t o, const std::array<std::uint8_t, N>& a)
    {
        assert(o + N <= b.size());
        for (std::size_t i = 0; i < N; ++i)
            b[o + i] = std::byte{a[i]};
    }
};

constexpr std::uint8_t headerByte7(std::uint8_t version, std::uint8_t typeV2, std::uint8_t typeV1)
{
    return static_cast<std::uint8_t>(version << 4 | (typeV2 & 3) << 2 | (typeV1 & 3));
}

// The proposal's length as Linux computes it from its counts (clc.c smc_clc_msg_prop_valid).
constexpr std::size_t proposalSizeV1(std::size_t iparea, std::size_t ipv6)
{
    return kPropBaseSize + iparea + kPrefixHeaderSize + kIpv6PrefixSize * ipv6 + kTrailerSize;
}
constexpr std::size_t proposalSizeV2(SmcType typeV1, SmcType typeV2, std::size_t ipv6,
                                     std::size_t eids, std::size_t ismEntries)
{
    std::size_t n = kPropBaseSize + kSmcdAreaSize + kTrailerSize;
    if (typeV1 != SmcType::None)
        n += kPrefixHeaderSize + kIpv6PrefixSize * ipv6;
    if (typeV2 != SmcType::None)
        n += kV2ExtFixedSize + kEidSize * eids;
    if (hasSmcD(typeV2))
        n += kSmcdV2ExtFixedSize + kGidChidSize * ismEntries;
    return n;
}

} // namespace smc::clc::wire
