// SPDX-License-Identifier: MIT
// Why bytes are not a CLC message (or a message cannot be written), in their own error category.
#pragma once

#include <system_error>

namespace smc
{

// Decoding errors are all std::errc::protocol_error conditions (Linux: -EPROTO, a hard
// error with no DECLINE and no fallback); FieldRange, an encoding error, is invalid_argument.
enum class ClcErrc {
    Truncated = 1, // the input ends before the message does (header or length field)
    TrailingBytes, // the input goes on after the message's length
    BadEyecatcher, // the header's eyecatcher is neither "SMCR" nor "SMCD" (EBCDIC)
    BadTrailer,    // the trailer is neither "SMCR" nor "SMCD" (EBCDIC)
    BadVersion,    // the header's version is 0 (or, encoding, above 15)
    UnknownType,   // the type byte is not PROPOSAL, ACCEPT, CONFIRM or DECLINE
    BadLength,     // the length field does not fit the message's layout
    BadSmcType,    // the SMC-R/SMC-D type bits do not fit the message
    BadOffset,     // a PROPOSAL area offset is not where the layout puts that area
    BadCount,      // a list is longer than CLC allows
    FieldRange,    // encoding: a value does not fit its field's bits
};

const std::error_category& clcCategory() noexcept;

inline std::error_code make_error_code(ClcErrc e) noexcept
{
    return {static_cast<int>(e), clcCategory()};
}

} // namespace smc

template <> struct std::is_error_code_enum<smc::ClcErrc> : std::true_type {
};
