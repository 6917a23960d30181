// SPDX-License-Identifier: MIT
// Messages of smc-core's error category.
#include "pool/errors.h"

#include <string>

namespace smc
{
namespace
{

class SmcCategory final : public std::error_category
{
public:
    const char* name() const noexcept override { return "smc"; }

    std::string message(int value) const override
    {
        switch (static_cast<Errc>(value)) {
        case Errc::InvalidSize:
            return "buffer size must be between 1 byte and the largest size class";
        case Errc::LimitReached:
            return "the pool's memory limit is reached";
        case Errc::OutOfMemory:
            return "out of memory for buffers, even at the smallest size class";
        case Errc::RegistrationFailed:
            return "buffer registration failed";
        case Errc::DoubleRelease:
            return "buffer released twice (or released by a former owner)";
        case Errc::ForeignBuffer:
            return "buffer belongs to another pool";
        case Errc::InvalidBuffer:
            return "not a buffer acquired from a pool";
        case Errc::TableFull:
            return "the pool holds its maximum number of buffer descriptors";
        case Errc::NotSupported:
            return "operation not supported here";
        case Errc::InvalidLink:
            return "link index out of range (0..2)";
        case Errc::LinkExists:
            return "link index already in use";
        case Errc::NoSuchLink:
            return "no link with that index";
        case Errc::DmbLimitReached:
            return "the ISM device has no free DMB slot";
        case Errc::UnknownToken:
            return "no DMB is registered under that token";
        case Errc::OutOfBounds:
            return "access beyond the end of the DMB";
        }
        return "unknown smc error " + std::to_string(value);
    }
};

} // namespace

const std::error_category& smcCategory() noexcept
{
    static const SmcCategory category;
    return category;
}

} // namespace smc
