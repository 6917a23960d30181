// SPDX-License-Identifier: MIT
// Messages of the link error category.
#include "smc/llc/link_errors.h"

#include <string>

namespace smc
{
namespace
{

class LinkCategory final : public std::error_category
{
public:
    const char* name() const noexcept override { return "smc.link"; }

    std::string message(int value) const override
    {
        switch (static_cast<LinkErrc>(value)) {
        case LinkErrc::InvalidSlot:
            return "link slot out of range (0..2)";
        case LinkErrc::NoSuchLink:
            return "no active link there";
        case LinkErrc::NoLinkRoom:
            return "the link group has no room for another link";
        case LinkErrc::WrongRole:
            return "not for this side's role (server or client)";
        }
        return "unknown link error " + std::to_string(value);
    }
};

} // namespace

const std::error_category& linkCategory() noexcept
{
    static const LinkCategory category;
    return category;
}

} // namespace smc
