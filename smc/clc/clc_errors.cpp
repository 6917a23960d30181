// SPDX-License-Identifier: MIT
// Messages of the CLC error category, and which generic condition each one is.
#include "smc/clc/clc_errors.h"

#include "base/error_category.h"

namespace smc
{
namespace
{

const char* clcMessage(ClcErrc e) noexcept
{
    switch (e) {
    case ClcErrc::Truncated:
        return "CLC message truncated (shorter than its header or its length field)";
    case ClcErrc::TrailingBytes:
        return "bytes after the end of the CLC message";
    case ClcErrc::BadEyecatcher:
        return "CLC header eyecatcher is neither SMCR nor SMCD";
    case ClcErrc::BadTrailer:
        return "CLC trailer eyecatcher is neither SMCR nor SMCD";
    case ClcErrc::BadVersion:
        return "CLC version out of range";
    case ClcErrc::UnknownType:
        return "unknown CLC message type";
    case ClcErrc::BadLength:
        return "CLC length field does not fit the message layout";
    case ClcErrc::BadSmcType:
        return "CLC SMC-R/SMC-D type bits do not fit the message";
    case ClcErrc::BadOffset:
        return "CLC proposal area offset does not match the layout";
    case ClcErrc::BadCount:
        return "CLC list longer than allowed";
    case ClcErrc::FieldRange:
        return "value does not fit its CLC field";
    }
    return nullptr;
}

// FieldRange (encoding) is a bad argument; every decoding error, Truncated
// up to BadCount, is a protocol error.
std::optional<std::errc> clcCondition(ClcErrc e) noexcept
{
    if (e == ClcErrc::FieldRange)
        return std::errc::invalid_argument;
    if (e >= ClcErrc::Truncated && e < ClcErrc::FieldRange)
        return std::errc::protocol_error;
    return std::nullopt;
}

} // namespace

const std::error_category& clcCategory() noexcept
{
    static const ErrorCategory<ClcErrc> category("smc.clc", "CLC", clcMessage, clcCondition);
    return category;
}

} // namespace smc
