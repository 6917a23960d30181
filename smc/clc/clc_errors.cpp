// SPDX-License-Identifier: MIT
// Messages of the CLC error category, and which generic condition each one is.
#include "smc/clc/clc_errors.h"

#include <string>

namespace smc
{
namespace
{

class ClcCategory final : public std::error_category
{
public:
    const char* name() const noexcept override { return "smc.clc"; }

    std::string message(int value) const override
    {
        switch (static_cast<ClcErrc>(value)) {
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
        return "unknown CLC error " + std::to_string(value);
    }

    std::error_condition default_error_condition(int value) const noexcept override
    {
        if (value == static_cast<int>(ClcErrc::FieldRange))
            return std::errc::invalid_argument;
        if (value >= static_cast<int>(ClcErrc::Truncated) &&
            value < static_cast<int>(ClcErrc::FieldRange))
            return std::errc::protocol_error;
        return {value, *this};
    }
};

} // namespace

const std::error_category& clcCategory() noexcept
{
    static const ClcCategory category;
    return category;
}

} // namespace smc
