// SPDX-License-Identifier: MIT
// Messages of the ISM error category, and which generic condition each one is.
#include "smc/ism/ism_errors.h"

#include <string>

namespace smc
{
namespace
{

class IsmCategory final : public std::error_category
{
public:
    const char* name() const noexcept override { return "smc.ism"; }

    std::string message(int value) const override
    {
        switch (static_cast<IsmErrc>(value)) {
        case IsmErrc::DmbLimitReached:
            return "the ISM device has no free DMB slot";
        case IsmErrc::UnknownToken:
            return "no DMB is registered under that token";
        case IsmErrc::OutOfBounds:
            return "access beyond the end of the DMB";
        }
        return "unknown ISM error " + std::to_string(value);
    }

    std::error_condition default_error_condition(int value) const noexcept override
    {
        if (static_cast<IsmErrc>(value) == IsmErrc::DmbLimitReached)
            return std::errc::no_space_on_device;
        return {value, *this};
    }
};

} // namespace

const std::error_category& ismCategory() noexcept
{
    static const IsmCategory category;
    return category;
}

} // namespace smc
