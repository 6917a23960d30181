// SPDX-License-Identifier: MIT
// errno as std::error_code: the one conversion every layer that makes system calls uses.
#pragma once

#include <cerrno>
#include <system_error>

namespace smc
{

// The error of the system call that just failed (EIO if it left errno 0, so a failure never
// reads as success).
inline std::error_code lastError() noexcept
{
    return {errno != 0 ? errno : EIO, std::generic_category()};
}

// An errno value (0: no error), as SO_ERROR and some libraries return it.
inline std::error_code errnoCode(int e) noexcept
{
    return e == 0 ? std::error_code() : std::error_code(e, std::generic_category());
}

} // namespace smc
