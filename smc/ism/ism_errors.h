// SPDX-License-Identifier: MIT
// The ISM device's error codes (DMB register, attach, move), in their own std::error_category.
#pragma once

#include <system_error>

namespace smc
{

enum class IsmErrc {
    DmbLimitReached = 1, // the ISM device has no free DMB slot (a smaller class may fit)
    UnknownToken,        // no DMB is registered under that token
    OutOfBounds,         // a DMB access beyond its end
};

// DmbLimitReached is equivalent to std::errc::no_space_on_device, which makes
// the pool try a smaller size class (Registrar's rule) without knowing ISM.
const std::error_category& ismCategory() noexcept;

inline std::error_code make_error_code(IsmErrc e) noexcept
{
    return {static_cast<int>(e), ismCategory()};
}

} // namespace smc

template <> struct std::is_error_code_enum<smc::IsmErrc> : std::true_type {
};
