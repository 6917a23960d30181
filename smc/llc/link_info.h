// SPDX-License-Identifier: MIT
// LinkInfo: one link of an SMC-R link group as `smcr linkgroup` lists it.
#pragma once

#include <cstdint>

#include "smc/transport/link_address.h"

namespace smc
{

enum class LinkState : std::uint8_t { Unused, Inactive, Activating, Active };
const char* toString(LinkState state) noexcept;

struct LinkInfo {
    unsigned slot = 0;
    std::uint8_t linkId = 0;
    LinkState state = LinkState::Unused;
    unsigned connections = 0;
    LinkAddress local, peer; // the first link's peer PSN is CLC's, not known here
};

} // namespace smc
