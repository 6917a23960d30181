// SPDX-License-Identifier: MIT
// The identifiers SMC's wire formats carry: a RoCE GID, a MAC, an SMC system id.
#pragma once

#include <array>
#include <cstdint>

namespace smc
{

using Gid = std::array<std::uint8_t, 16>;     // RoCE GID (an IPv6 or IPv4-mapped address)
using Mac = std::array<std::uint8_t, 6>;      // Ethernet MAC
using SystemId = std::array<std::uint8_t, 8>; // Linux: 2 random bytes + a MAC; ours: random

} // namespace smc
