// SPDX-License-Identifier: MIT
// Messages of the pool's error category.
#include "pool/errors.h"

#include <string>

namespace smc
{
namespace
{

class PoolCategory final : public std::error_category
{
public:
    const char* name() const noexcept override { return "smc.pool"; }

    std::string message(int value) const override
    {
        switch (static_cast<PoolErrc>(value)) {
        case PoolErrc::InvalidSize:
            return "buffer size must be between 1 byte and the largest size class";
        case PoolErrc::LimitReached:
            return "the pool's memory limit is reached";
        case PoolErrc::OutOfMemory:
            return "out of memory for buffers, even at the smallest size class";
        case PoolErrc::RegistrationFailed:
            return "buffer registration failed";
        case PoolErrc::DoubleRelease:
            return "buffer released twice (or released by a former owner)";
        case PoolErrc::ForeignBuffer:
            return "buffer belongs to another pool";
        case PoolErrc::InvalidBuffer:
            return "not a buffer acquired from a pool";
        case PoolErrc::TableFull:
            return "the pool holds its maximum number of buffer descriptors";
        case PoolErrc::NotSupported:
            return "operation not supported here";
        case PoolErrc::InvalidLink:
            return "link index out of range (0..2)";
        case PoolErrc::LinkExists:
            return "link index already in use";
        case PoolErrc::NoSuchLink:
            return "no link with that index";
        case PoolErrc::InvalidKind:
            return "buffer kind must be rmb or sndbuf";
        }
        return "unknown pool error " + std::to_string(value);
    }
};

} // namespace

const std::error_category& poolCategory() noexcept
{
    static const PoolCategory category;
    return category;
}

} // namespace smc
