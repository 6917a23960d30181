// SPDX-License-Identifier: MIT
// The one way a misused Result fails: a message, then abort.
#include "base/result.h"

#include <cstdio>
#include <cstdlib>

namespace smc::detail
{

void badResultAccess(std::error_code error) noexcept
{
    std::fprintf(stderr, "smc: Result::value() called on an error: %s (%s:%d)\n",
                 error.message().c_str(), error.category().name(), error.value());
    std::abort();
}

} // namespace smc::detail
