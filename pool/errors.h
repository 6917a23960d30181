// SPDX-License-Identifier: MIT
// The pool's error codes (acquire, release, links of a pool), in their own std::error_category.
#pragma once

#include <system_error>

namespace smc
{

enum class PoolErrc {
    InvalidSize = 1,    // a buffer size of 0, or above the largest size class
    LimitReached,       // the pool's memory limit leaves no room, even after downgrading
    OutOfMemory,        // the page allocator failed for every class down to 16 KiB
    RegistrationFailed, // the registrar refused a buffer
    DoubleRelease,      // the buffer was already released (or re-acquired by someone else)
    ForeignBuffer,      // the buffer belongs to another pool
    InvalidBuffer,      // a null or never-acquired buffer reference
    TableFull,          // the pool holds its maximum number of descriptors
    NotSupported,       // the operation does not apply (e.g. links on an SMC-D pool)
    InvalidLink,        // a link index outside 0..2
    LinkExists,         // the link index is already in use
    NoSuchLink,         // the link index is not in use
    InvalidKind,        // a BufferKind that is neither Rmb nor Sndbuf
};

const std::error_category& poolCategory() noexcept;

inline std::error_code make_error_code(PoolErrc e) noexcept
{
    return {static_cast<int>(e), poolCategory()};
}

} // namespace smc

template <> struct std::is_error_code_enum<smc::PoolErrc> : std::true_type {
};
