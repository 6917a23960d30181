// SPDX-License-Identifier: MIT
// The ISM device's error codes (DMB register, attach, move), in their own std::error_category.
#pragma once

#include <system_error>

namespace smc
{

enum class IsmErrc {
    DmbLimitReached = 1, // the ISM device has no free DMB slot (a smaller class may fit)
    UnknownToken,        // no DMB is registered under that token
    OutOfBounds,         // a DMB access beyond its end
    // Cross-process loopback-ism (ShmIsm::attachRemote):
    PeerUnreachable, // no ISM device listens under that GID (another host, gone, other netns)
    AttachRefused,   // the owner said no (no such grant for us, grant used, wrong user or pid)
    OwnerMismatch,   // the GID's socket is not served by that GID's process of our user
    BadReply,        // the owner's reply is missing or malformed (size, magic, token, fds)
    BadSharedMemory, // the DMB fd is not a memfd sealed against shrink/grow of the announced size
    BadDoorbell,     // the signal fd the owner sent is not a Unix datagram socket
};

// DmbLimitReached is equivalent to std::errc::no_space_on_device, which makes
// the pool try a smaller size class (Registrar's rule) without knowing ISM.
const std::error_category& ismCategory() noexcept;

inline std::error_code make_error_code(IsmErrc e) noexcept
{
    return {static_cast<int>(e), ismCategory()};
}

} // namespace smc

template <> struct std::is_error_code_enum<smc::IsmErrc> : std::true_type {
};
