// SPDX-License-Identifier: MIT
// Messages of the CDC error category, and which generic condition each one is.
#include "smc/cdc/cdc_errors.h"

#include <string>

namespace smc
{
namespace
{

class CdcCategory final : public std::error_category
{
public:
    const char* name() const noexcept override { return "smc.cdc"; }

    std::string message(int value) const override
    {
        switch (static_cast<CdcErrc>(value)) {
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
        return "unknown CDC error " + std::to_string(value);
    }

    std::error_condition default_error_condition(int value) const noexcept override
    {
        if (value >= static_cast<int>(CdcErrc::Truncated) &&
            value <= static_cast<int>(CdcErrc::CursorBeyondProducer))
            return std::errc::protocol_error;
        if (value >= static_cast<int>(CdcErrc::ExceedsSpace) &&
            value <= static_cast<int>(CdcErrc::BadRingSize))
            return std::errc::invalid_argument;
        return {value, *this};
    }
};

} // namespace

const std::error_category& cdcCategory() noexcept
{
    static const CdcCategory category;
    return category;
}

} // namespace smc
