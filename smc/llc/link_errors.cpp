// SPDX-License-Identifier: MIT
// Messages of the link error category.
#include "smc/llc/link_errors.h"

#include "base/error_category.h"

namespace smc
{
namespace
{

const char* linkMessage(LinkErrc e) noexcept
{
    switch (e) {
    case LinkErrc::InvalidSlot:
        return "link slot out of range (0..2)";
    case LinkErrc::NoSuchLink:
        return "no active link there";
    case LinkErrc::NoLinkRoom:
        return "the link group has no room for another link";
    case LinkErrc::WrongRole:
        return "not for this side's role (server or client)";
    }
    return nullptr;
}

} // namespace

const std::error_category& linkCategory() noexcept
{
    static const ErrorCategory<LinkErrc> category("smc.link", "link", linkMessage);
    return category;
}

} // namespace smc
