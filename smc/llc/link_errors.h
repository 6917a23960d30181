// SPDX-License-Identifier: MIT
// A link group's link-level error codes (slots, LLC flows, rtoken tables), in their own category.
#pragma once

#include <system_error>

namespace smc
{

// The LLC flows also return generic codes with their POSIX meaning:
// timed_out (no answer in time), connection_refused (the peer declined),
// not_connected (the link or group is gone), protocol_error (the peer broke
// the flow's sequence), operation_in_progress (the same request is running).
enum class LinkErrc {
    InvalidSlot = 1, // a link slot outside 0..2
    NoSuchLink,      // no (active) link in that slot, or none to run the flow on
    NoLinkRoom,      // the group has all the links it may have, or no slot for another
    WrongRole,       // the call belongs to the other role (addLink: server, requestAddLink: client)
};

const std::error_category& linkCategory() noexcept;

inline std::error_code make_error_code(LinkErrc e) noexcept
{
    return {static_cast<int>(e), linkCategory()};
}

} // namespace smc

template <> struct std::is_error_code_enum<smc::LinkErrc> : std::true_type {
};
