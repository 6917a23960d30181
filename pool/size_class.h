// SPDX-License-Identifier: MIT
// SMC buffer size classes: 16 KiB x 2^n, rounded up like Linux's smc_compress_bufsize.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "base/result.h"
#include "pool/errors.h"

namespace smc
{

// SMC-R buffers are RDMA-registered memory; SMC-D buffers are ISM DMBs.
enum class Tech : std::uint8_t { SmcR, SmcD };

inline constexpr std::size_t kMinBufferSize = 16384; // class 0
inline constexpr unsigned kSizeClasses = 16;         // the CLC field is 4 bits wide
inline constexpr unsigned kMaxClassSmcR = 15;        // 512 MiB
inline constexpr unsigned kMaxClassSmcD = 6;         // 1 MiB

constexpr unsigned maxSizeClass(Tech tech) noexcept
{
    return tech == Tech::SmcR ? kMaxClassSmcR : kMaxClassSmcD;
}

constexpr std::size_t classBytes(unsigned sizeClass) noexcept
{
    return kMinBufferSize << sizeClass;
}

// The kernel's rounding, clamp included: the smallest class that holds `bytes`,
// but never above the technology's largest class. 0 maps to class 0.
constexpr unsigned compressBufferSize(std::size_t bytes, Tech tech) noexcept
{
    if (bytes <= kMinBufferSize)
        return 0;
    const std::size_t units = (bytes - 1) >> 14; // 16 KiB units, minus one
    const unsigned cls = static_cast<unsigned>(std::bit_width(units));
    return cls < maxSizeClass(tech) ? cls : maxSizeClass(tech);
}

// What a pool user asks for: like the kernel's rounding, but a request that no
// class can hold (0 bytes, or more than the largest class) is an error rather
// than silently clamped, so a caller never gets less than it asked for.
inline Result<unsigned> sizeClassFor(std::size_t bytes, Tech tech) noexcept
{
    if (bytes == 0 || bytes > classBytes(maxSizeClass(tech)))
        return PoolErrc::InvalidSize;
    return compressBufferSize(bytes, tech);
}

} // namespace smc
