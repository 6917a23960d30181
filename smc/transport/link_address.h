// SPDX-License-Identifier: MIT
// LinkAddress: where one end of an SMC-R link is (its queue pair, GID, MAC, MTU).
#pragma once

#include <cstdint>

#include "base/wire_ids.h"

namespace smc
{

// Where one end of a link is: what CLC and ADD_LINK carry.
struct LinkAddress {
    std::uint32_t qpn = 0;
    std::uint32_t psn = 0; // 24 bits
    Gid gid{};
    Mac mac{};
    std::uint8_t mtu = 3; // IB MTU enum (3 = 1024)
};

} // namespace smc
