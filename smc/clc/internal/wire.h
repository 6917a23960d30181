// SPDX-License-Identifier: MIT
// Private to smc/clc: byte access and the offsets of Linux's CLC layouts.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/bytes.h"
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

using Reader = BeReader;
using Writer = BeWriter;

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
