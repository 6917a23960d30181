// SPDX-License-Identifier: MIT
// PageAllocator: where buffer memory comes from (page-aligned, zero on first use).
#pragma once

#include <cstddef>
#include <memory>

namespace smc
{

// Returns page-aligned, zero-filled memory whose deleter gives it back, or
// null when none can be had. Injected so tests can make allocation fail.
class PageAllocator
{
public:
    virtual ~PageAllocator() = default;
    virtual std::shared_ptr<std::byte> allocate(std::size_t bytes) noexcept = 0;
};

// Anonymous private mmap: the kernel hands out zero pages on first touch,
// so a fresh buffer costs nothing until it is used.
class MmapAllocator final : public PageAllocator
{
public:
    std::shared_ptr<std::byte> allocate(std::size_t bytes) noexcept override;

    // The process-wide instance pools use by default.
    static MmapAllocator& instance() noexcept;
};

} // namespace smc
