// SPDX-License-Identifier: MIT
// Messages of the pool's error category.
#include "pool/errors.h"

#include "base/error_category.h"

namespace smc
{
namespace
{

const char* poolMessage(PoolErrc e) noexcept
{
    switch (e) {
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
    return nullptr;
}

} // namespace

const std::error_category& poolCategory() noexcept
{
    static const ErrorCategory<PoolErrc> category("smc.pool", "pool", poolMessage);
    return category;
}

} // namespace smc
