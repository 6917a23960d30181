// SPDX-License-Identifier: MIT
// A connection's error codes (handshake, data path), in their own std::error_category.
#pragma once

#include <system_error>

namespace smc
{

enum class ConnErrc {
    HandshakeDone = 1, // Handshake::complete() after it completed or was abandoned
    PeerRmbUnknown,    // write() before the handshake told us the peer's RMB
    SndbufRange,       // write() beyond the end of the connection's sndbuf
    PeerRmbRange,      // write() beyond the end of the peer's RMB
    PeerRmbGone,       // the peer deleted its RMB (DELETE_RKEY): nothing to write to
    UnknownConnection, // another group's connection
    Closed,            // closeConnection() ran already
};

const std::error_category& connCategory() noexcept;

inline std::error_code make_error_code(ConnErrc e) noexcept
{
    return {static_cast<int>(e), connCategory()};
}

} // namespace smc

template <> struct std::is_error_code_enum<smc::ConnErrc> : std::true_type {
};
