// SPDX-License-Identifier: MIT
// Messages of the CDC error category, and which generic condition each one is.
#include "smc/cdc/cdc_errors.h"

#include "base/error_category.h"

namespace smc
{
namespace
{

const char* cdcMessage(CdcErrc e) noexcept
{
    switch (e) {
    case CdcErrc::Truncated:
        return "CDC message truncated";
    case CdcErrc::BadType:
        return "not a CDC message (type byte is not 0xFE)";
    case CdcErrc::BadLength:
        return "CDC length byte is not 44";
    case CdcErrc::CursorOutOfRange:
        return "CDC cursor count is outside its ring";
    case CdcErrc::CursorBackwards:
        return "CDC cursor moves backwards";
    case CdcErrc::CursorTooFar:
        return "CDC cursor is more than one ring ahead";
    case CdcErrc::CursorBeyondProducer:
        return "CDC consumer cursor is beyond the data produced";
    case CdcErrc::ExceedsSpace:
        return "more bytes produced than the peer ring has free";
    case CdcErrc::ExceedsReadable:
        return "more bytes consumed than are readable";
    case CdcErrc::BadRingSize:
        return "CDC ring size out of range";
    }
    return nullptr;
}

// What the peer sent wrong (Truncated up to CursorBeyondProducer) is a protocol error; the
// caller's own mistakes (ExceedsSpace up to BadRingSize) are bad arguments.
std::optional<std::errc> cdcCondition(CdcErrc e) noexcept
{
    if (e >= CdcErrc::Truncated && e <= CdcErrc::CursorBeyondProducer)
        return std::errc::protocol_error;
    if (e >= CdcErrc::ExceedsSpace && e <= CdcErrc::BadRingSize)
        return std::errc::invalid_argument;
    return std::nullopt;
}

} // namespace

const std::error_category& cdcCategory() noexcept
{
    static const ErrorCategory<CdcErrc> category("smc.cdc", "CDC", cdcMessage, cdcCondition);
    return category;
}

} // namespace smc
