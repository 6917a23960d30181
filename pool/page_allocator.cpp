// SPDX-License-Identifier: MIT
// The mmap-backed page allocator.
#include "pool/page_allocator.h"

#include <new>

#include <sys/mman.h>

namespace smc
{

std::shared_ptr<std::byte> MmapAllocator::allocate(std::size_t bytes) noexcept
{
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return nullptr;
    try {
        return {static_cast<std::byte*>(p), [bytes](std::byte* q) { munmap(q, bytes); }};
    } catch (const std::bad_alloc&) {
        // The shared_ptr's control block could not be allocated; its
        // constructor already ran the deleter.
        return nullptr;
    }
}

MmapAllocator& MmapAllocator::instance() noexcept
{
    static MmapAllocator allocator;
    return allocator;
}

} // namespace smc
