// SPDX-License-Identifier: MIT
// Messages of the ISM error category, and which generic condition each one is.
#include "smc/ism/ism_errors.h"

#include "base/error_category.h"

namespace smc
{
namespace
{

const char* ismMessage(IsmErrc e) noexcept
{
    switch (e) {
    case IsmErrc::DmbLimitReached:
        return "the ISM device has no free DMB slot";
    case IsmErrc::UnknownToken:
        return "no DMB is registered under that token";
    case IsmErrc::OutOfBounds:
        return "access beyond the end of the DMB";
    case IsmErrc::PeerUnreachable:
        return "no ISM device listens under that GID on this host";
    case IsmErrc::AttachRefused:
        return "the DMB's owner refused the attach";
    case IsmErrc::OwnerMismatch:
        return "the ISM socket is not served by the GID's process of this user";
    case IsmErrc::BadReply:
        return "missing or malformed attach reply from the DMB's owner";
    case IsmErrc::BadSharedMemory:
        return "the DMB's owner sent no sealed memfd of the announced size";
    case IsmErrc::BadDoorbell:
        return "the DMB's owner sent a doorbell that is not a Unix datagram socket";
    }
    return nullptr;
}

std::optional<std::errc> ismCondition(IsmErrc e) noexcept
{
    if (e == IsmErrc::DmbLimitReached)
        return std::errc::no_space_on_device;
    return std::nullopt;
}

} // namespace

const std::error_category& ismCategory() noexcept
{
    static const ErrorCategory<IsmErrc> category("smc.ism", "ISM", ismMessage, ismCondition);
    return category;
}

} // namespace smc
