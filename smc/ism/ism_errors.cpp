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
        case IsmErrc::BadEventFd:
            return "the DMB's owner sent a signal fd that is not an eventfd";
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
