// SPDX-License-Identifier: MIT
// Why bytes are not a CDC message, a peer's cursor is refused, or a stream call is wrong.
#pragma once

#include <system_error>

namespace smc
{

// What the peer sent (Truncated .. CursorBeyondProducer) is a std::errc::protocol_error
// condition (Linux would drop or abort the connection); the caller's mistakes (ExceedsSpace ..
// BadRingSize) are invalid_argument.
enum class CdcErrc {
    Truncated = 1,        // fewer bytes than the fields a CDC message needs
    BadType,              // byte 0 is not the CDC type 0xFE
    BadLength,            // the SMC-R length byte is not 44
    CursorOutOfRange,     // a received cursor's count is not below its ring's size
    CursorBackwards,      // a received cursor is behind one already received or used
    CursorTooFar,         // a received cursor is more than one ring ahead of its reference
    CursorBeyondProducer, // the peer's consumer cursor is beyond what we produced
    ExceedsSpace,         // produce(n): n is more than sendSpace()
    ExceedsReadable,      // consume(n): n is more than readable()
    BadRingSize,          // a ring size of 0 or above kMaxRingSize
};

const std::error_category& cdcCategory() noexcept;

inline std::error_code make_error_code(CdcErrc e) noexcept
{
    return {static_cast<int>(e), cdcCategory()};
}

} // namespace smc

template <> struct std::is_error_code_enum<smc::CdcErrc> : std::true_type {
};
